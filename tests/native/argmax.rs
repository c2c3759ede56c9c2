//! `argmax` and `argmin` (docs/teg.md §5): numpy's answers written out by hand for ties, NaN,
//! ±0.0, all-infinite rows and u64 values above i64's MAX, in the interpreter and the JIT; the
//! JIT against the interpreter on random inputs of eight dtypes, with the rows vectorised (and a
//! masked tail) and the reduction in order, on 1 and 2 threads; and passes (row shards, fusion,
//! the cost pass) keeping the results, re-parsed from their printed output.

use super::dtype_reductions::{both_give, interp, jit};
use crate::common;
use std::collections::HashMap;
use tapc_runtime::{Data, Tensor};

const SRC: &str =
    "op @am(x: f32[M, K], u: u64[M, K]) -> (a: i64[M], b: i64[M], c: i64[M], d: i64[M]) {
  a[i] = argmax[k](x[i, k])
  b[i] = argmin[k](x[i, k])
  c[i] = argmax[k](u[i, k])
  d[i] = argmin[k](u[i, k] * 2) + 10
}
graph @g {
  %x = source @x : f32[4, 5]
  %u = source @u : u64[4, 5]
  %a, %b, %c, %d = apply @am(%x, %u)
  sink @a %a
  sink @b %b
  sink @c %c
  sink @d %d
}";

fn inputs() -> HashMap<String, Tensor> {
    let (nan, inf) = (f32::NAN, f32::INFINITY);
    #[rustfmt::skip]
    let x = vec![
        1.0, 3.0, 3.0, 2.0, 0.0,        // a tie: the first 3
        nan, 5.0, nan, -1.0, 7.0,       // the first NaN wins both ways
        0.0, -0.0, -0.0, 0.0, -1.0,     // 0.0 == -0.0: a tie
        -inf, -inf, -inf, -inf, -inf,   // all equal to the start value: index 0
    ];
    let big = 1u64 << 63;
    #[rustfmt::skip]
    let u = vec![
        1, big + 5, 7, u64::MAX - 1, 2,
        0, 0, 0, 0, 0,
        5, 4, 3, 2, 1,
        9, 9, big, big, 1,
    ];
    HashMap::from([
        (
            "x".to_string(),
            Tensor::new(vec![4, 5], Data::F32(x)).unwrap(),
        ),
        (
            "u".to_string(),
            Tensor::new(vec![4, 5], Data::U64(u)).unwrap(),
        ),
    ])
}

#[test]
fn argmax_and_argmin_give_numpys_indices() {
    let ins = inputs();
    // numpy 2.4.6: np.argmax(x, 1), np.argmin(x, 1), np.argmax(u, 1), np.argmin(u * 2, 1) + 10
    // (u * 2 wraps: big + 5 becomes 10, big becomes 0).
    let want = [
        vec![1, 0, 0, 0],
        vec![4, 0, 4, 0],
        vec![3, 0, 0, 2],
        vec![10, 10, 14, 12],
    ];
    for (how, got) in [
        ("interpreter", interp(SRC, &ins)),
        ("native", jit(SRC, &ins, 2)),
    ] {
        for ((name, t), w) in got.iter().zip(&want) {
            assert_eq!(t.data, Data::I64(w.clone()), "{how}: @{name}");
        }
    }
    // An empty argmax is the reduction variable's first value, 0.
    let empty = "op @e(x: f32[K]) -> (y: i64[]) {\n  y[] = argmax[k](x[k])\n}\n\
                 graph @g {\n  %x = source @x : f32[0]\n  %y = apply @e(%x)\n  sink @y %y\n}";
    let none = Tensor::new(vec![0], Data::F32(vec![])).unwrap();
    both_give(empty, none, &[Data::I64(vec![0])]);
}

fn program(d: &str, m: usize, k: usize) -> String {
    format!(
        "op @am(x: {d}[M, K]) -> (a: i64[M], b: i64[M], c: i64[M]) {{
  a[i] = argmax[k](x[i, k])
  b[i] = argmin[k](x[i, k])
  c[i] = argmax[k](x[i, k] - x[i, 0]) * 3 + i
}}
graph @g {{
  %x = source @x : {d}[{m}, {k}]
  %a, %b, %c = apply @am(%x)
  sink @a %a
  sink @b %b
  sink @c %c
}}
"
    )
}

#[test]
fn argmax_and_argmin_in_native_code_match_the_interpreter() {
    let mut compared = 0;
    for d in ["f32", "f64", "f16", "bf16", "i8", "u8", "i32", "u64"] {
        for (m, k) in [(37, 5), (3, 40)] {
            let src = program(d, m, k);
            let (module, _) = common::compile_ok("argmax", &src);
            let ins = common::inputs(&module, 0);
            let want = interp(&src, &ins);
            for threads in [1, 2] {
                let got = jit(&src, &ins, threads);
                for ((name, w), (_, g)) in want.iter().zip(&got) {
                    assert_eq!(w, g, "{d}[{m}, {k}], {threads} threads: @{name}");
                    compared += w.len();
                }
            }
        }
    }
    // 8 dtypes; (37 + 3) rows of 3 sinks, on 1 and 2 threads.
    assert_eq!(compared, 8 * (37 + 3) * 3 * 2);
}

#[test]
fn passes_keep_argmax_results() {
    let src = program("f32", 6, 9);
    let (module, _) = common::compile_ok("argmax", &src);
    let ins = common::inputs(&module, 0);
    let mut checked = 0;
    for pipeline in [
        "canonicalize,shard{parts=2},fuse,canonicalize",
        "canonicalize,shard{parts=3,dim=i},fuse",
        "canonicalize,cost{nodes=2,objective=memory},fuse,canonicalize",
    ] {
        let (before, after, printed) = common::before_after(&src, pipeline, &ins);
        assert_eq!(before, after, "{pipeline}:\n{printed}");
        assert!(printed.contains("argmax[k]"), "{printed}");
        checked += 1;
    }
    assert_eq!(checked, 3);
}

/// `argmax`/`argmin` vectorised along a contiguous reduction of at least 64 points (per-lane
/// best values and first indices, combined by value then index, the tail in order) against
/// the interpreter: random rows of six dtypes (integer rows full of ties), and f32 rows built
/// for the combine: the best value in two lanes of different vectors, NaNs in the vector part
/// and in the tail only, −0.0 against 0.0, an all −inf row, the best value only in the tail.
#[test]
fn vectorised_argmax_keeps_first_indices_and_nans() {
    let mut compared = 0;
    for d in ["f32", "f64", "bf16", "i8", "u8", "u64"] {
        for (m, k) in [(5, 64), (4, 65), (3, 203), (2, 1031)] {
            let src = program(d, m, k);
            let (module, _) = common::compile_ok("argmax", &src);
            let ins = common::inputs(&module, 0);
            let want = interp(&src, &ins);
            for threads in [1, 2] {
                for ((name, w), (_, g)) in want.iter().zip(&jit(&src, &ins, threads)) {
                    assert_eq!(w, g, "{d}[{m}, {k}], {threads} threads: @{name}");
                    compared += w.len();
                }
            }
        }
    }
    // 6 dtypes; (5 + 4 + 3 + 2) rows of 3 sinks, on 1 and 2 threads.
    assert_eq!(compared, 6 * 14 * 3 * 2);
    let k = 203;
    let (nan, inf) = (f32::NAN, f32::INFINITY);
    let mut rows = vec![vec![-1.0f32; k]; 6];
    rows[0] = vec![-inf; k];
    (rows[1][17], rows[1][64 + 3]) = (5.0, 5.0);
    (rows[2][100], rows[2][40], rows[2][41]) = (nan, nan, 9.0);
    (rows[3][10], rows[3][5]) = (-0.0, 0.0);
    rows[4][k - 1] = 3.0;
    (rows[5][k - 2], rows[5][0]) = (nan, 7.0);
    let x = Tensor::new(vec![6, k], Data::F32(rows.concat())).unwrap();
    let ins = HashMap::from([("x".to_string(), x)]);
    let src = program("f32", 6, k);
    let want = interp(&src, &ins);
    assert_eq!(
        want[0].1.data,
        Data::I64(vec![0, 17, 40, 5, k as i64 - 1, k as i64 - 2])
    );
    for threads in [1, 2] {
        assert_eq!(jit(&src, &ins, threads), want, "{threads} threads");
    }
}
