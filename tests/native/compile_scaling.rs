//! Compile work stays linear in graph size (issue 11), checked by counting, not timing:
//! structurally identical applies share one LLVM kernel, so a long chain compiles O(1) kernels,
//! and the shared kernels still compute every task's values.

use crate::common;

use std::collections::HashMap;
use tapc::codegen::{self, schedule};
use tapc_runtime::exec::Options;
use tapc_runtime::{Data, Tensor};

const OP: &str = "op @f(x: f32[N]) -> (y: f32[N]) {\n  y[i] = x[i] * 1.5 + 0.25\n}\n\
                  op @g(x: f32[M, N]) -> (y: f32[M, N]) {\n  y[i, j] = x[i, j] - 1.0\n}\n";

/// `n` applies of `@f`, each reading the previous one.
fn chain(n: usize) -> String {
    let mut s = format!("{OP}graph @chain {{\n  %x0 = source @x : f32[100]\n");
    for i in 0..n {
        s += &format!("  %x{} = apply @f(%x{i})\n", i + 1);
    }
    s + &format!("  sink @y %x{n}\n}}\n")
}

/// `n` applies of `@f` over overlapping slices of one source, concatenated.
fn concat(n: usize) -> String {
    let mut s = format!("{OP}graph @cat {{\n  %x = source @x : f32[{}]\n", n + 7);
    for i in 0..n {
        s += &format!(
            "  %s{i} = slice %x [{i}:{}]\n  %y{i} = apply @f(%s{i})\n",
            i + 7
        );
    }
    let parts: Vec<String> = (0..n).map(|i| format!("%y{i}")).collect();
    s + &format!(
        "  %c = concat {} axis 0\n  sink @c %c\n}}\n",
        parts.join(", ")
    )
}

fn kernels_and_tasks(src: &str) -> (usize, usize) {
    let (m, facts) = common::compile_ok("generated", src);
    let s = schedule::build(&m, &m.graphs[0], &facts[0], 16).expect("schedules");
    (s.kernels.len(), s.plan.tasks.len())
}

#[test]
fn a_chain_of_identical_applies_compiles_one_kernel() {
    assert_eq!(kernels_and_tasks(&chain(1000)), (1, 1000));
}

#[test]
fn applies_placed_into_a_concat_share_one_kernel() {
    assert_eq!(kernels_and_tasks(&concat(1000)), (1, 1000));
}

#[test]
fn applies_with_different_layouts_keep_their_own_kernels() {
    // The same op over a row-major and a transposed operand: different strides, different code.
    let src = format!(
        "{OP}graph @two {{\n  %a = source @a : f32[4, 6]\n  %b = source @b : f32[6, 4]\n  \
         %t = transpose %b [1, 0]\n  %p = apply @g(%a)\n  %q = apply @g(%t)\n  %r = apply @g(%p)\n  \
         sink @p %p\n  sink @q %q\n  sink @r %r\n}}\n"
    );
    assert_eq!(kernels_and_tasks(&src), (2, 3));
}

fn f32s(t: &Tensor) -> &[f32] {
    match &t.data {
        Data::F32(v) => v,
        other => panic!("expected f32 data, found {:?}", other.dtype()),
    }
}

#[test]
fn shared_kernels_compute_what_the_interpreter_does() {
    for src in [chain(40), concat(40)] {
        let (m, facts) = common::compile_ok("generated", &src);
        let n = m.graphs[0].sources().next().expect("a source").1.elements() as usize;
        let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
        let inputs =
            HashMap::from([("x".to_string(), Tensor::new(vec![n], Data::F32(x)).unwrap())]);
        let want = common::run(&m, &facts, 0, &inputs);
        for threads in [1, 2] {
            let opts = Options {
                threads,
                ..Options::default()
            };
            let (got, _) = codegen::run_jit(&m, 0, &facts[0], &inputs, &Default::default(), &opts)
                .expect("runs");
            for (name, t) in got {
                assert_eq!(
                    f32s(&t),
                    f32s(&want[&name]),
                    "sink @{name}, {threads} threads"
                );
            }
        }
    }
}
