//! Random valid TEG graphs for property tests: a growing list of 2-D values built from
//! generators, elementwise and reducing applies, and views (so view chains and
//! slice/concat patterns occur often).

use proptest::prelude::*;

pub const OPS: &str = "op @relu(x: f32[..S]) -> (y: f32[..S]) {\n  y[..i] = max(x[..i], 0.0)\n}\n\
op @affine(x: f32[M, N]) -> (y: f32[M, N]) {\n  y[i, j] = x[i, j] * 1.5 - 0.25\n}\n\
op @rowsum(x: f32[M, N]) -> (y: f32[M, 1]) {\n  y[i, c] = sum[j](x[i, j]) + f32(c)\n}\n";

/// One graph statement choice, applied to a growing list of 2-D values.
#[derive(Debug, Clone)]
pub enum Step {
    Gen(u8, u8, u8),
    Relu(usize),
    Affine(usize),
    RowSum(usize),
    Transpose(usize),
    Reverse(usize, bool),
    Slice(usize, u8, u8),
    Concat(usize, usize),
    Flatten(usize),
    SliceOfConcat(usize, u8),
}

pub fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..3, 1u8..5, 1u8..5).prop_map(|(k, a, b)| Step::Gen(k, a, b)),
        any::<usize>().prop_map(Step::Relu),
        any::<usize>().prop_map(Step::Affine),
        any::<usize>().prop_map(Step::RowSum),
        any::<usize>().prop_map(Step::Transpose),
        (any::<usize>(), any::<bool>()).prop_map(|(v, d)| Step::Reverse(v, d)),
        (any::<usize>(), 0u8..4, 1u8..3).prop_map(|(v, s, t)| Step::Slice(v, s, t)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Step::Concat(a, b)),
        any::<usize>().prop_map(Step::Flatten),
        (any::<usize>(), 0u8..3).prop_map(|(v, k)| Step::SliceOfConcat(v, k)),
    ]
}

pub fn build(steps: &[Step]) -> String {
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
            Step::Flatten(i) => {
                let (r, c) = shapes[pick(i)];
                lines.push(format!("  {name}.f = reshape %v{} [{}]", pick(i), r * c));
                (format!("{name} = reshape {name}.f [{c}, {r}]"), (c, r))
            }
            Step::SliceOfConcat(i, k) => {
                let (r, c) = shapes[pick(i)];
                lines.push(format!(
                    "  {name}.k = concat %v{0}, %v{0}, %v{0} axis 0",
                    pick(i)
                ));
                let k = *k as i64;
                (
                    format!("{name} = slice {name}.k [{}:{}, 0:{c}]", k * r, (k + 1) * r),
                    (r, c),
                )
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
