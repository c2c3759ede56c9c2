//! `canonicalize` keeps every sunk value bit-identical (the interpreter is the oracle), on the
//! examples and on random graphs full of view chains, and its output re-verifies.

use crate::common;
use common::before_after;
use common::graphgen::{build, step};
use proptest::prelude::*;
use std::collections::HashMap;

#[test]
fn examples_keep_their_values() {
    for name in ["conv.teg", "softmax.teg", "attention.teg"] {
        let (b, a, _) = before_after(&common::example(name), "canonicalize", &HashMap::new());
        assert_eq!(b, a, "{name}");
    }
}

/// The source of `tests/filetests/canonicalize/NAME`.
fn filetest(name: &str) -> String {
    let dir = format!(
        "{}/tests/filetests/canonicalize",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(format!("{dir}/{name}")).unwrap()
}

#[test]
fn chain_examples_keep_their_values() {
    let src = filetest("chains.teg");
    let (b, a, _) = before_after(&src, "canonicalize", &HashMap::new());
    assert_eq!(b, a);
}

/// Pins keep what they name (tests/filetests/canonicalize/pin.teg): same values, and a second
/// run changes nothing.
#[test]
fn pinned_values_keep_their_values() {
    let src = filetest("pin.teg");
    let (b, a, printed) = before_after(&src, "canonicalize", &HashMap::new());
    assert_eq!(b, a);
    assert_eq!(printed.matches("pin %").count(), 4, "{printed}");
    let (_, _, again) = before_after(&printed, "canonicalize", &HashMap::new());
    assert_eq!(again, printed);
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
