//! No input, however malformed, panics the compiler, and every stage keeps its promises: a CI
//! slice of the fuzzer in `fuzzing/` (`cargo bench --bench fuzz` runs a million inputs and
//! more). Mutated examples and token soup go through the front end; random graphs through
//! random pass pipelines (re-parsed, verified, run to bit-identical sinks) and through the
//! native backend (against the interpreter).

use crate::fuzzing;

use fuzzing::{Plan, Rng};

/// Runs `plan` and fails with every finding.
fn slice(plan: Plan) -> fuzzing::Counts {
    let mut findings = Vec::new();
    let c = fuzzing::run(
        plan,
        &mut |stage, e| findings.push(format!("[{stage}] {e}")),
        &mut |_| {},
    );
    assert!(findings.is_empty(), "{}", findings.join("\n\n"));
    c
}

#[test]
fn mutated_examples_never_panic() {
    let seeds = fuzzing::seeds();
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    for i in 0..3000 {
        fuzzing::front_end(&fuzzing::mutate(&seeds[i % seeds.len()], &mut rng));
    }
}

#[test]
fn random_token_soup_never_panics() {
    let mut rng = Rng(0xdead_beef_0000_0042);
    for _ in 0..2000 {
        fuzzing::front_end(&fuzzing::token_soup(&mut rng));
    }
}

#[test]
fn random_pipelines_keep_every_sink() {
    let c = slice(Plan {
        seed: 0x0c1_5eed,
        front_end: 0,
        pipelines: 300,
        native: 0,
    });
    // Most pipelines must actually run (a pass declining is allowed, not the norm).
    assert!(c.declined * 2 < c.pipelines, "{c:?}");
}

#[test]
fn random_graphs_run_natively_as_in_the_interpreter() {
    let c = slice(Plan {
        seed: 0x0c1_5eed,
        front_end: 0,
        pipelines: 0,
        native: 24,
    });
    assert_eq!(c.native, 24);
    assert_eq!(
        c.native_graphs, 24,
        "every random graph was compared: {c:?}"
    );
}
