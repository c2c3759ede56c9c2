//! Property test: random valid graphs print, re-parse to the same module, print identically,
//! and run to the same sink values.

use crate::common;
use common::graphgen::{build, step};
use proptest::prelude::*;
use std::collections::HashMap;
use tapc::print::print_module;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn random_graphs_round_trip(steps in proptest::collection::vec(step(), 0..12)) {
        let src = build(&steps);
        let (m, facts) = common::compile_ok("generated", &src);
        let printed = print_module(&m);
        let (m2, facts2) = common::compile_ok("printed", &printed);
        prop_assert_eq!(&m, &m2);
        prop_assert_eq!(&printed, &print_module(&m2));
        let a = common::run(&m, &facts, 0, &HashMap::new());
        let b = common::run(&m2, &facts2, 0, &HashMap::new());
        prop_assert_eq!(a, b);
    }
}
