//! Reductions and functions over the dtypes f16, bf16, i8, u8, i16, u16, u32 and u64: the
//! interpreter against the JIT (1 and 2 threads) on the random inputs of `common::inputs`, at a
//! reduction extent that runs in order (3) and one that is vectorised with a masked tail (37);
//! and hand-computed values where the dtype's semantics show (an i8 sum that wraps, a u64
//! `max` above i64's MAX, bf16 rounding after every step of a sum, the identities of empty
//! reductions).

use crate::common;
use std::collections::HashMap;
use tapc_runtime::exec::Options;
use tapc_runtime::{DType, Data, Tensor};

const DTYPES: [&str; 8] = ["f16", "bf16", "i8", "u8", "i16", "u16", "u32", "u64"];

/// Sum, product, max and min over `k`, then `abs`, a cast round trip through f32 and, for
/// floats, `sqrt(abs)` and `exp`.
fn program(d: &str, m: usize, k: usize) -> String {
    let float = DType::from_name(d).is_some_and(|t| t.is_float());
    let f = if float {
        format!("sqrt(abs(x[i, 0])) + exp(x[i, 0] * {d}(0.25))")
    } else {
        "abs(x[i, 0])".to_string()
    };
    format!(
        "op @red(x: {d}[M, K]) -> (s: {d}[M], p: {d}[M], hi: {d}[M], lo: {d}[M], f: {d}[M], \
         c: {d}[M]) {{
  s[i] = sum[k](x[i, k])
  p[i] = prod[k](x[i, k])
  hi[i] = max[k](x[i, k])
  lo[i] = min[k](x[i, k])
  f[i] = {f}
  c[i] = {d}(f32(x[i, 1]) * 2.0)
}}
graph @g {{
  %x = source @x : {d}[{m}, {k}]
  %s, %p, %hi, %lo, %f, %c = apply @red(%x)
  sink @s %s
  sink @p %p
  sink @hi %hi
  sink @lo %lo
  sink @f %f
  sink @c %c
}}
"
    )
}

pub(super) fn jit(
    src: &str,
    ins: &HashMap<String, Tensor>,
    threads: usize,
) -> Vec<(String, Tensor)> {
    let (m, facts) = common::compile_ok("dtype", src);
    let opts = Options {
        threads,
        record: false,
    };
    tapc::codegen::run_jit(&m, 0, &facts[0], ins, &Default::default(), &opts)
        .unwrap_or_else(|d| panic!("{}", d.message))
        .0
}

pub(super) fn interp(src: &str, ins: &HashMap<String, Tensor>) -> Vec<(String, Tensor)> {
    let (m, facts) = common::compile_ok("dtype", src);
    tapc::interp::run(&m, &m.graphs[0], &facts[0], ins).unwrap_or_else(|d| panic!("{}", d.message))
}

#[test]
fn reductions_and_functions_match_the_interpreter_for_every_new_dtype() {
    let mut compared = 0;
    for d in DTYPES {
        for k in [3, 37] {
            let src = program(d, 5, k);
            let (m, _) = common::compile_ok("dtype", &src);
            let ins = common::inputs(&m, 0);
            let want = interp(&src, &ins);
            for threads in [1, 2] {
                let got = jit(&src, &ins, threads);
                for ((wn, w), (_, g)) in want.iter().zip(&got) {
                    let bad = common::tolerance::first_mismatch(w, g);
                    assert!(
                        bad.is_none(),
                        "{d}, K = {k}, {threads} threads: @{wn}[{}]: interpreter {}, native {}",
                        bad.unwrap(),
                        common::f64s(w)[bad.unwrap()],
                        common::f64s(g)[bad.unwrap()]
                    );
                    compared += w.len();
                }
            }
        }
    }
    // 8 dtypes, 2 extents, 2 thread counts, 6 sinks of 5 elements.
    assert_eq!(compared, 8 * 2 * 2 * 6 * 5);
}

/// Runs `src` (one source `@x`) in the interpreter and the JIT; both must give `want` for
/// every sink, in order.
pub(super) fn both_give(src: &str, x: Tensor, want: &[Data]) {
    let ins = HashMap::from([("x".to_string(), x)]);
    for (how, got) in [
        ("interpreter", interp(src, &ins)),
        ("native", jit(src, &ins, 2)),
    ] {
        let got: Vec<&Data> = got.iter().map(|(_, t)| &t.data).collect();
        assert_eq!(got, want.iter().collect::<Vec<_>>(), "{how}:\n{src}");
    }
}

#[test]
fn integer_reductions_wrap_and_order_by_the_dtype() {
    let src = "op @r(x: i8[K]) -> (s: i8[], p: i8[]) {
  s[] = sum[k](x[k])
  p[] = prod[k](x[k])
}
graph @g {
  %x = source @x : i8[3]
  %s, %p = apply @r(%x)
  sink @s %s
  sink @p %p
}";
    // 100 + 100 - 3 = 197 wraps to -59; 100 · 100 · -3 = -30000 wraps to -48 (mod 256).
    let x = Tensor::new(vec![3], Data::I8(vec![100, 100, -3])).unwrap();
    both_give(src, x, &[Data::I8(vec![-59]), Data::I8(vec![-48])]);

    let src = "op @r(x: u64[K]) -> (hi: u64[], lo: u64[]) {
  hi[] = max[k](x[k])
  lo[] = min[k](x[k])
}
graph @g {
  %x = source @x : u64[5]
  %hi, %lo = apply @r(%x)
  sink @hi %hi
  sink @lo %lo
}";
    // Above i64's MAX a u64 is still the greater (a signed comparison would pick 3).
    let big = (1u64 << 63) + 5;
    let x = Tensor::new(vec![5], Data::U64(vec![3, big, 7, u64::MAX - 1, 2])).unwrap();
    both_give(src, x, &[Data::U64(vec![u64::MAX - 1]), Data::U64(vec![2])]);
}

#[test]
fn a_bf16_sum_rounds_after_every_step() {
    let src = "op @r(x: bf16[K]) -> (s: bf16[], w: f32[]) {
  s[] = sum[k](x[k])
  w[] = sum[k](f32(x[k]))
}
graph @g {
  %x = source @x : bf16[3]
  %s, %w = apply @r(%x)
  sink @s %s
  sink @w %w
}";
    // 1 + 2⁻⁸ is a tie between 1 and 1 + 2⁻⁷, which rounds to the even 1, twice; the same
    // sum in f32 keeps 1 + 2⁻⁷.
    let x = [1.0, 1.0 / 256.0, 1.0 / 256.0].map(tapc_runtime::bf16::from_f64);
    let x = Tensor::new(vec![3], Data::BF16(x.to_vec())).unwrap();
    let one = tapc_runtime::bf16::from_f64(1.0);
    both_give(
        src,
        x,
        &[Data::BF16(vec![one]), Data::F32(vec![1.0 + 1.0 / 128.0])],
    );
}

#[test]
fn empty_reductions_give_the_identity_of_the_dtype() {
    let src = "op @r(x: u16[K]) -> (s: u16[], p: u16[], hi: u16[], lo: u16[]) {
  s[] = sum[k](x[k])
  p[] = prod[k](x[k])
  hi[] = max[k](x[k])
  lo[] = min[k](x[k])
}
graph @g {
  %x = source @x : u16[0]
  %s, %p, %hi, %lo = apply @r(%x)
  sink @s %s
  sink @p %p
  sink @hi %hi
  sink @lo %lo
}";
    let x = Tensor::new(vec![0], Data::U16(vec![])).unwrap();
    let want = [0, 1, 0, u16::MAX].map(|v| Data::U16(vec![v]));
    both_give(src, x, &want);
    let src = src.replace("u16", "f16");
    let x = Tensor::new(vec![0], Data::F16(vec![])).unwrap();
    let want = [0.0, 1.0, f64::NEG_INFINITY, f64::INFINITY]
        .map(|v| Data::F16(vec![tapc_runtime::f16::from_f64(v)]));
    both_give(&src, x, &want);
}
