//! Property test: random valid graphs print, re-parse to the same module, print identically,
//! and run to the same sink values.

mod common;
use proptest::prelude::*;
use std::collections::HashMap;
use tapc::syntax::printer::print_module;

const OPS: &str = "op @relu(x: f32[..S]) -> (y: f32[..S]) {\n  y[..i] = max(x[..i], 0.0)\n}\n\
op @affine(x: f32[M, N]) -> (y: f32[M, N]) {\n  y[i, j] = x[i, j] * 1.5 - 0.25\n}\n\
op @rowsum(x: f32[M, N]) -> (y: f32[M, 1]) {\n  y[i, c] = sum[j](x[i, j]) + f32(c)\n}\n";

/// One graph statement choice, applied to a growing list of 2-D values.
#[derive(Debug, Clone)]
enum Step {
    Gen(u8, u8, u8),
    Relu(usize),
    Affine(usize),
    RowSum(usize),
    Transpose(usize),
    Reverse(usize, bool),
    Slice(usize, u8, u8),
    Concat(usize, usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..3, 1u8..5, 1u8..5).prop_map(|(k, a, b)| Step::Gen(k, a, b)),
        any::<usize>().prop_map(Step::Relu),
        any::<usize>().prop_map(Step::Affine),
        any::<usize>().prop_map(Step::RowSum),
        any::<usize>().prop_map(Step::Transpose),
        (any::<usize>(), any::<bool>()).prop_map(|(v, d)| Step::Reverse(v, d)),
        (any::<usize>(), 0u8..4, 1u8..3).prop_map(|(v, s, t)| Step::Slice(v, s, t)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Step::Concat(a, b)),
    ]
}

fn build(steps: &[Step]) -> String {
    let mut shapes: Vec<(i64, i64)> = vec![(3, 4)];
    let mut lines = vec!["  %v0 = rand seed 1 : f32[3, 4]".to_string()];
    for s in steps {
        let n = shapes.len();
        let name = format!("%v{n}");
        let pick = |i: &usize| i % n;
        let (line, shape) = match s {
            Step::Gen(k, a, b) => {
                let g = ["zeros", "ones", "rand seed 9"][*k as usize];
                (
                    format!("{name} = {g} : f32[{a}, {b}]"),
                    (*a as i64, *b as i64),
                )
            }
            Step::Relu(i) => (
                format!("{name} = apply @relu(%v{})", pick(i)),
                shapes[pick(i)],
            ),
            Step::Affine(i) => (
                format!("{name} = apply @affine(%v{})", pick(i)),
                shapes[pick(i)],
            ),
            Step::RowSum(i) => (
                format!("{name} = apply @rowsum(%v{})", pick(i)),
                (shapes[pick(i)].0, 1),
            ),
            Step::Transpose(i) => (
                format!("{name} = transpose %v{} [1, 0]", pick(i)),
                (shapes[pick(i)].1, shapes[pick(i)].0),
            ),
            Step::Reverse(i, d) => (
                format!("{name} = reverse %v{} [{}]", pick(i), u8::from(*d)),
                shapes[pick(i)],
            ),
            Step::Slice(i, start, step) => {
                let (r, c) = shapes[pick(i)];
                let st = (*start as i64).min(c - 1);
                let count = (c - st + *step as i64 - 1) / *step as i64;
                (
                    format!("{name} = slice %v{} [0:{r}, {st}:{c}:{step}]", pick(i)),
                    (r, count),
                )
            }
            Step::Concat(a, b) => {
                let (a, b) = (pick(a), pick(b));
                if shapes[a].1 == shapes[b].1 {
                    (
                        format!("{name} = concat %v{a}, %v{b} axis 0"),
                        (shapes[a].0 + shapes[b].0, shapes[a].1),
                    )
                } else {
                    (format!("{name} = reverse %v{a} [0]"), shapes[a])
                }
            }
        };
        lines.push(format!("  {line}"));
        shapes.push(shape);
    }
    let last = shapes.len() - 1;
    format!(
        "{OPS}graph @g {{\n{}\n  sink @out %v{last}\n  sink @first %v0\n}}\n",
        lines.join("\n")
    )
}

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
