//! `grad` on random graphs (issue 19's property test): [`GRAPHS`] graphs drawn by
//! `common::grad_graphs` from a fixed seed (the same graphs every run), each lowered by the
//! `grad` pass (the printed module re-parses to itself and verifies: `grad_cases::lowered`),
//! run by the interpreter, and every entry of every gradient compared with central
//! differences of the graph's loss as written (without the `grad` statement; for an
//! intermediate `wrt` value, of the loss with that value made a source), within the tolerance
//! of `tests/passes/grad.rs`. The test counts the graphs, the constructs and the entries it
//! checked, prints them, and fails when fewer graphs were checked than configured or when a
//! construct of `grad_graphs::CONSTRUCTS` never occurred. On a failure proptest shrinks the
//! recipe and prints the smallest failing graph.

use crate::common;
use crate::grad::loss;
use common::grad_cases::{central_differences, lowered, FD_H, FD_TOL};
use common::grad_graphs::{build, inputs, recipe, runner, GradGraph, CONSTRUCTS};
use proptest::test_runner::TestCaseError;
use std::cell::RefCell;
use std::collections::HashMap;

/// How many graphs the test draws.
const GRAPHS: u32 = 200;

/// What the run checked.
#[derive(Default)]
struct Counts {
    graphs: usize,
    steps: usize,
    entries: usize,
    wrt: usize,
    intermediate: usize,
    constructs: HashMap<&'static str, usize>,
}

/// The loss at the graph's value of `m` (loss alone), each gradient against central
/// differences; the number of entries compared.
fn check(g: &GradGraph) -> Result<usize, String> {
    let (m, f) = lowered("random graph", &g.src);
    let ins = inputs(g);
    let sinks = common::run(&m, &f, 0, &ins);
    let (fm, ff) = common::compile_ok("the loss alone", &g.forward);
    let fwd = common::run(&fm, &ff, 0, &ins);
    let (got, want) = (common::f64s(&sinks["l"])[0], common::f64s(&fwd["l"])[0]);
    if (got - want).abs() > 1e-12 * (1.0 + want.abs()) {
        return Err(format!(
            "the lowered graph's loss is {got}, the graph's {want}"
        ));
    }
    let mut entries = 0;
    for w in &g.wrt {
        let grad = common::f64s(&sinks[&format!("d_{w}")]);
        entries += match &g.cut {
            Some((v, src)) if v == w => {
                let (cm, cf) = common::compile_ok("the loss of the cut value", src);
                let mut ci = ins.clone();
                ci.insert(v.clone(), fwd[v].clone());
                central_differences(&|i| loss(&cm, &cf, i), &ci, w, &grad, (FD_H, FD_TOL))?
            }
            _ => central_differences(&|i| loss(&fm, &ff, i), &ins, w, &grad, (FD_H, FD_TOL))?,
        };
    }
    Ok(entries)
}

fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic".into())
}

#[test]
fn random_graphs_gradients_match_central_differences() {
    let counts = RefCell::new(Counts::default());
    let result = runner(GRAPHS).run(&recipe(), |r| {
        let g = build(&r);
        let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&g)))
            .unwrap_or_else(|p| Err(panic_text(p)))
            .map_err(|e| TestCaseError::fail(format!("{e}\nin the graph:\n{}", g.src)))?;
        let mut c = counts.borrow_mut();
        c.graphs += 1;
        c.steps += g.constructs.len();
        c.entries += checked;
        c.wrt += g.wrt.len();
        c.intermediate += usize::from(g.cut.is_some());
        for k in &g.constructs {
            *c.constructs.entry(k).or_default() += 1;
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let c = counts.into_inner();
    let per: Vec<String> = CONSTRUCTS
        .iter()
        .map(|k| format!("{k} {}", c.constructs.get(k).copied().unwrap_or(0)))
        .collect();
    eprintln!(
        "grad on random graphs: {} graphs, {} steps, {} wrt values ({} graphs with an intermediate one), \
         {} gradient entries checked against central differences; per construct: {}",
        c.graphs,
        c.steps,
        c.wrt,
        c.intermediate,
        c.entries,
        per.join(", ")
    );
    assert_eq!(c.graphs, GRAPHS as usize, "every graph was checked");
    let never: Vec<&str> = CONSTRUCTS
        .iter()
        .copied()
        .filter(|k| !c.constructs.contains_key(k))
        .collect();
    assert!(never.is_empty(), "constructs never drawn: {never:?}");
    assert!(
        c.intermediate > 0,
        "no graph differentiated an intermediate value"
    );
}
