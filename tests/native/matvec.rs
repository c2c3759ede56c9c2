//! Matrix × vector, row vector × matrix and outer products natively against the interpreter
//! (issue 22's bandwidth-bound kernels), on 1 and 2 threads:
//! - M = 1 with rows wider than a register panel (N > 256 f32 lanes) and more than 8 reduction
//!   points: accumulators kept in a stack buffer per block of 2,048 lanes, 4 rows of `b`
//!   streamed at a time (`src/codegen/kernel/stream.rs`); N crosses the block of 4,096 lanes
//!   (4,099; 8,209 twice) and the 2-thread split;
//! - N = 1: rows of scalar reductions along `k`, 4 rows at a time (`reduce.rs`), rows of 1
//!   to 4,099 points;
//! - K = 1 (outer products) and the edge sizes 1–5, 8, 9, 15, 17, 31, 33 and primes around
//!   them, as plain matmuls, with a bias epilogue (`linear`), as a batch of row vectors, in
//!   f32 (every shape), f64 and i32 (every other shape).
//!
//! Float sinks are held to the float contract (`tests/common/tolerance.rs`), i32 exactly; with
//! `--fp-contract=off` the streamed row-vector path must be bit-equal to the interpreter (each
//! output still sums in index order).

use crate::common;

use common::tolerance::first_mismatch;
use common::Rng;
use std::collections::HashMap;
use tapc::codegen::FpContract;
use tapc_runtime::exec::Options;
use tapc_runtime::{Data, Tensor};

/// (M, K, N): the streamed row vector × matrix, the matrix × vector, outer products and
/// small edges.
const SHAPES: [(usize, usize, usize); 33] = [
    // M = 1, wide rows: streamed (K > 8), or in registers (K ≤ 8).
    (1, 9, 257),
    (1, 17, 300),
    (1, 31, 1031),
    (1, 33, 2053),
    (1, 37, 4099),
    (1, 1, 4099),
    (1, 5, 2053),
    (1, 8, 997),
    (1, 15, 2048),
    (1, 131, 2111),
    (1, 11, 8209),
    // N = 1: rows 4 at a time, edge row counts, short and long rows.
    (1, 1031, 1),
    (2, 17, 1),
    (3, 4, 1),
    (4, 33, 1),
    (5, 1031, 1),
    (8, 3, 1),
    (9, 1024, 1),
    (15, 2053, 1),
    (17, 64, 1),
    (31, 9, 1),
    (33, 4099, 1),
    (37, 1, 1),
    // Two and three rows of wide, odd matrices (the benchmark's M = 2–3 rows).
    (2, 37, 3001),
    (3, 29, 2999),
    // Outer products and short reductions.
    (31, 1, 2053),
    (2, 1, 4099),
    (17, 2, 33),
    (1031, 1, 9),
    // Small edges.
    (1, 1, 1),
    (1, 2, 3),
    (3, 5, 8),
    (5, 9, 15),
];

/// Batched row vectors `[B, 1, K] × [B, K, N]`: the streamed path under an outer variable.
const BATCHED: [(usize, usize, usize); 3] = [(3, 17, 300), (2, 33, 2053), (5, 9, 1031)];

fn source(dt: &str, m: usize, k: usize, n: usize) -> String {
    let zero = if dt == "i32" { "0" } else { "0.0" };
    format!(
        "op @mm(a: {dt}[M, K], b: {dt}[K, N]) -> (c: {dt}[M, N]) {{
  c[i, j] = sum[k](a[i, k] * b[k, j])
}}
op @linear(x: {dt}[M, K], w: {dt}[K, N], b: {dt}[N]) -> (y: {dt}[M, N]) {{
  y[i, j] = max(sum[k](x[i, k] * w[k, j]) + b[j], {zero})
}}
graph @g {{
  %a = source @a : {dt}[{m}, {k}]
  %b = source @b : {dt}[{k}, {n}]
  %bias = source @bias : {dt}[{n}]
  %c = apply @mm(%a, %b)
  %y = apply @linear(%a, %b, %bias)
  sink @c %c
  sink @y %y
}}
"
    )
}

fn batched_source(bt: usize, k: usize, n: usize) -> String {
    format!(
        "op @bmm(a: f32[B, M, K], b: f32[B, K, N]) -> (c: f32[B, M, N]) {{
  c[b, i, j] = sum[k](a[b, i, k] * b[b, k, j])
}}
graph @g {{
  %a = source @a : f32[{bt}, 1, {k}]
  %b = source @b : f32[{bt}, {k}, {n}]
  %c = apply @bmm(%a, %b)
  sink @c %c
}}
"
    )
}

fn tensor(dt: &str, shape: Vec<usize>, rng: &mut Rng) -> Tensor {
    let len: usize = shape.iter().product();
    let data = match dt {
        "f32" => Data::F32((0..len).map(|_| rng.uniform(-2.0, 2.0) as f32).collect()),
        "f64" => Data::F64((0..len).map(|_| rng.uniform(-2.0, 2.0)).collect()),
        _ => Data::I32((0..len).map(|_| rng.uniform(-50.0, 50.0) as i32).collect()),
    };
    Tensor::new(shape, data).unwrap()
}

/// Runs `src` (inputs `inputs`) in the interpreter and natively on 1 and 2 threads with
/// `contract`; `bits`: native must equal the interpreter bit for bit. Returns the number of
/// sink elements compared.
fn check(
    what: &str,
    src: &str,
    inputs: &HashMap<String, Tensor>,
    contract: FpContract,
    bits: bool,
) -> usize {
    let (m, facts) = common::compile_ok(what, src);
    let want = common::run(&m, &facts, 0, inputs);
    let copts = tapc::codegen::Options {
        fp_contract: contract,
        ..Default::default()
    };
    let mut compared = 0;
    for threads in [1, 2] {
        let opts = Options {
            threads,
            record: false,
        };
        let (got, _) = tapc::codegen::run_jit(&m, 0, &facts[0], inputs, &copts, &opts).unwrap();
        for (name, t) in &got {
            let w = &want[name];
            let bad = if bits {
                let (a, g) = (common::f64s(w), common::f64s(t));
                a.iter()
                    .zip(&g)
                    .position(|(x, y)| x.to_bits() != y.to_bits())
            } else {
                first_mismatch(w, t)
            };
            if let Some(e) = bad {
                let (a, g) = (common::f64s(w), common::f64s(t));
                panic!(
                    "{what}, {threads} threads: sink {name} element {e}: interpreter {:e}, native {:e}",
                    a[e], g[e]
                );
            }
            compared += t.len();
        }
    }
    compared
}

fn mm_inputs(dt: &str, m: usize, k: usize, n: usize, rng: &mut Rng) -> HashMap<String, Tensor> {
    HashMap::from([
        ("a".to_string(), tensor(dt, vec![m, k], rng)),
        ("b".to_string(), tensor(dt, vec![k, n], rng)),
        ("bias".to_string(), tensor(dt, vec![n], rng)),
    ])
}

#[test]
fn matrix_vector_shapes_match_the_interpreter_on_1_and_2_threads() {
    let mut rng = Rng(0x3a7_7ec);
    let mut compared = 0;
    let mut want = 0;
    for dt in ["f32", "f64", "i32"] {
        // f32 at every shape; f64 and i32 (exact) at every other one.
        let every = if dt == "f32" { 1 } else { 2 };
        for &(m, k, n) in SHAPES.iter().step_by(every) {
            let what = format!("{dt} {m}x{k}x{n}");
            let ins = mm_inputs(dt, m, k, n, &mut rng);
            compared += check(&what, &source(dt, m, k, n), &ins, FpContract::On, false);
            // Two sinks of m·n on two thread counts.
            want += 2 * 2 * m * n;
        }
    }
    for (bt, k, n) in BATCHED {
        let ins = HashMap::from([
            ("a".to_string(), tensor("f32", vec![bt, 1, k], &mut rng)),
            ("b".to_string(), tensor("f32", vec![bt, k, n], &mut rng)),
        ]);
        let what = format!("batched {bt}x1x{k}x{n}");
        compared += check(
            &what,
            &batched_source(bt, k, n),
            &ins,
            FpContract::On,
            false,
        );
        want += 2 * bt * n;
    }
    assert_eq!(compared, want);
}

/// The streamed row vector × matrix keeps each output's index order: with separate roundings
/// it is bit-equal to the interpreter.
#[test]
fn streamed_row_vector_times_matrix_is_bit_equal_without_contraction() {
    let mut rng = Rng(0x5ea_b175);
    let mut compared = 0;
    let shapes = [(1, 9, 257), (1, 37, 4099), (1, 131, 2111), (1, 11, 8209)];
    for (m, k, n) in shapes {
        let ins = mm_inputs("f32", m, k, n, &mut rng);
        let what = format!("f32 {m}x{k}x{n}, fp-contract=off");
        compared += check(&what, &source("f32", m, k, n), &ins, FpContract::Off, true);
    }
    let want: usize = shapes.iter().map(|&(m, _, n)| 2 * 2 * m * n).sum();
    assert_eq!(compared, want);
}
