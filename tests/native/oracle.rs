//! The oracle's integer division and `max`/`min` against native code and a plain-Rust reference,
//! bit for bit: random i64/i32 pairs mixed with edge values (MIN, MAX, ±1, 0, pairs whose
//! `q·b` overflows) and float pairs with signed zeros, NaNs and infinities. Each graph compiles
//! once (JIT) and runs on every generated batch, in the interpreter and natively.

use crate::common;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::collections::HashMap;
use tapc_runtime::exec::Options;
use tapc_runtime::{Data, Tensor};

/// Pairs per batch (one graph run); batches per dtype.
const N: usize = 512;
const BATCHES: u32 = 48;

fn source(ty: &str, float: bool) -> String {
    let ints = if float {
        ""
    } else {
        "  q[i] = a[i] / b[i]\n  r[i] = a[i] % b[i]\n"
    };
    let outs = if float { "" } else { "q: T[N], r: T[N], " };
    let sinks = if float { "" } else { "%q, %r, " };
    let sink_lines = if float {
        ""
    } else {
        "  sink @q %q\n  sink @r %r\n"
    };
    format!(
        "op @ops(a: T[N], b: T[N]) -> ({outs}mx: T[N], mn: T[N]) {{\n{ints}  mx[i] = max(a[i], b[i])\n  mn[i] = min(a[i], b[i])\n}}\n\
graph @g {{\n  %a = source @a : T[{N}]\n  %b = source @b : T[{N}]\n  {sinks}%mx, %mn = apply @ops(%a, %b)\n{sink_lines}  sink @mx %mx\n  sink @mn %mn\n}}\n"
    )
    .replace('T', ty)
}

/// What a batch is checked with: the inputs `a` and `b`, the sinks by name, who computed them.
type Check<'a> = &'a dyn Fn(&Data, &Data, &HashMap<String, Tensor>, &str) -> Result<(), String>;

/// Runs `src` on every batch `gen` yields, natively (1 and 2 threads) and in the interpreter;
/// `check` compares the sinks (by name) with the reference.
fn differential(src: &str, gen: BoxedStrategy<(Data, Data)>, check: Check) {
    let (m, facts) = common::compile_ok("oracle", src);
    tapc::codegen::with_jit(&m, 0, &facts[0], &Default::default(), |p| {
        let mut runner = TestRunner::new(Config {
            cases: BATCHES,
            failure_persistence: None,
            ..Config::default()
        });
        runner
            .run(&gen, |(a, b)| {
                run_batch(&m, &facts, p, &a, &b, check).map_err(TestCaseError::fail)
            })
            .unwrap_or_else(|e| panic!("{e}"));
    })
    .unwrap_or_else(|d| panic!("{}", d.message));
}

/// Runs one batch `a`, `b` in the interpreter and natively (`p`, 1 and 2 threads) and checks
/// each result.
fn run_batch(
    m: &tapc::ir::Module,
    facts: &[tapc::verify::GraphFacts],
    p: &tapc::codegen::Program,
    a: &Data,
    b: &Data,
    check: Check,
) -> Result<(), String> {
    let ins: HashMap<String, Tensor> = [("a", a.clone()), ("b", b.clone())]
        .into_iter()
        .map(|(n, d)| (n.to_string(), Tensor::new(vec![N], d).unwrap()))
        .collect();
    let interp = common::run(m, facts, 0, &ins);
    check(a, b, &interp, "interpreter")?;
    for threads in [1, 2] {
        let opts = Options {
            threads,
            record: false,
        };
        let (sinks, _) = p.run(&ins, &opts)?;
        let native: HashMap<String, Tensor> = sinks.into_iter().collect();
        check(a, b, &native, &format!("native, {threads} threads"))?;
    }
    Ok(())
}

/// Runs `src` on the one batch of `pairs` (repeated to `N` pairs) and checks it with `check`.
fn fixed_batch(src: &str, pairs: (Data, Data), check: Check) {
    let (m, facts) = common::compile_ok("oracle", src);
    tapc::codegen::with_jit(&m, 0, &facts[0], &Default::default(), |p| {
        run_batch(&m, &facts, p, &pairs.0, &pairs.1, check)
    })
    .unwrap_or_else(|d| panic!("{}", d.message))
    .unwrap_or_else(|e| panic!("{e}"));
}

/// Floor division and remainder in i128, exact; `x / 0 == x % 0 == 0`, quotient wrapped.
fn reference_div_rem(a: i64, b: i64, bits: u32) -> (i64, i64) {
    if b == 0 {
        return (0, 0);
    }
    let (a, b) = (a as i128, b as i128);
    let q = a.div_euclid(b) - i128::from(b < 0 && a.rem_euclid(b) != 0);
    let r = a - b * q;
    let wrap = |v: i128| {
        if bits == 32 {
            v as i32 as i64
        } else {
            v as i64
        }
    };
    (wrap(q), r as i64)
}

fn edge_ints(bits: u32) -> Vec<i64> {
    let (min, max) = if bits == 32 {
        (i32::MIN as i64, i32::MAX as i64)
    } else {
        (i64::MIN, i64::MAX)
    };
    let mut v = vec![min, min + 1, max, max - 1, -1, 0, 1, 2, -2, 7, -7];
    if bits == 64 {
        // The pair from the bug report: `q·b` overflows, the remainder is 3463865057354168204.
        v.extend([-7673562495525745938, 5568713776439957071]);
    }
    v
}

fn int_pairs(bits: u32) -> BoxedStrategy<(Data, Data)> {
    let edges = edge_ints(bits);
    let one = move || {
        let e = edges.clone();
        prop_oneof![
            2 => any::<i64>().prop_map(move |x| if bits == 32 { x as i32 as i64 } else { x }),
            1 => (0..e.len()).prop_map(move |k| e[k]),
            1 => -20i64..20,
        ]
    };
    proptest::collection::vec((one(), one()), N)
        .prop_map(move |pairs| {
            let (a, b): (Vec<i64>, Vec<i64>) = pairs.into_iter().unzip();
            if bits == 32 {
                let c = |v: Vec<i64>| Data::I32(v.into_iter().map(|x| x as i32).collect());
                (c(a), c(b))
            } else {
                (Data::I64(a), Data::I64(b))
            }
        })
        .boxed()
}

fn ints(d: &Data) -> Vec<i64> {
    match d {
        Data::I32(v) => v.iter().map(|&x| x as i64).collect(),
        Data::I64(v) => v.clone(),
        other => panic!("not an int tensor: {:?}", other.dtype()),
    }
}

fn check_ints(
    bits: u32,
) -> impl Fn(&Data, &Data, &HashMap<String, Tensor>, &str) -> Result<(), String> {
    move |a, b, got, who| {
        let (a, b) = (ints(a), ints(b));
        let (q, r, mx, mn) = (
            ints(&got["q"].data),
            ints(&got["r"].data),
            ints(&got["mx"].data),
            ints(&got["mn"].data),
        );
        for i in 0..N {
            let (wq, wr) = reference_div_rem(a[i], b[i], bits);
            let want = (wq, wr, a[i].max(b[i]), a[i].min(b[i]));
            let have = (q[i], r[i], mx[i], mn[i]);
            if want != have {
                return Err(format!(
                    "{who}, i{bits}: a = {}, b = {}: (a / b, a % b, max, min) = {have:?}, want {want:?}",
                    a[i], b[i]
                ));
            }
        }
        Ok(())
    }
}

#[test]
fn i64_div_rem_max_min_match_the_reference() {
    differential(&source("i64", false), int_pairs(64), &check_ints(64));
}

#[test]
fn i32_div_rem_max_min_match_the_reference() {
    differential(&source("i32", false), int_pairs(32), &check_ints(32));
}

/// numpy's `maximum`/`minimum` on x86-64: whether `a` (rather than `b`) is the result: a NaN
/// `a`, or an `a` strictly greater (less) than `b`.
fn reference_picks_a(a: f64, b: f64, max: bool) -> bool {
    a.is_nan() || if max { a > b } else { a < b }
}

/// Quiet NaNs only: an f32 signalling NaN is quieted when widened, on any hardware.
fn edge_floats() -> Vec<f64> {
    vec![
        0.0,
        -0.0,
        f64::NAN,
        -f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1.0,
        -1.0,
        f32::MIN_POSITIVE as f64,
        f32::MAX as f64,
    ]
}

fn float_pairs(f32s: bool) -> BoxedStrategy<(Data, Data)> {
    let e = edge_floats();
    let one = move || {
        let e = e.clone();
        prop_oneof![
            3 => (0..e.len()).prop_map(move |k| e[k]),
            1 => (-3i32..3).prop_map(f64::from),
            1 => any::<f64>().prop_map(|x| if x.is_nan() { f64::NAN } else { x }),
        ]
    };
    proptest::collection::vec((one(), one()), N)
        .prop_map(move |pairs| {
            let (a, b): (Vec<f64>, Vec<f64>) = pairs.into_iter().unzip();
            if f32s {
                let c = |v: Vec<f64>| Data::F32(v.into_iter().map(|x| x as f32).collect());
                (c(a), c(b))
            } else {
                (Data::F64(a), Data::F64(b))
            }
        })
        .boxed()
}

/// Values with their bit patterns (f32 bits widened losslessly, so NaN payloads are compared).
fn floats(d: &Data) -> Vec<(f64, u64)> {
    match d {
        Data::F32(v) => v.iter().map(|&x| (x as f64, x.to_bits() as u64)).collect(),
        Data::F64(v) => v.iter().map(|&x| (x, x.to_bits())).collect(),
        other => panic!("not a float tensor: {:?}", other.dtype()),
    }
}

fn check_floats(
    a: &Data,
    b: &Data,
    got: &HashMap<String, Tensor>,
    who: &str,
) -> Result<(), String> {
    let (fa, fb) = (floats(a), floats(b));
    for (sink, max) in [("mx", true), ("mn", false)] {
        let have = floats(&got[sink].data);
        for i in 0..N {
            let want = if reference_picks_a(fa[i].0, fb[i].0, max) {
                fa[i].1
            } else {
                fb[i].1
            };
            if have[i].1 != want {
                return Err(format!(
                    "{who}: {}({:?}, {:?}) has bits {:#x}, want {want:#x}",
                    if max { "max" } else { "min" },
                    fa[i].0,
                    fb[i].0,
                    have[i].1
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn f32_max_min_of_signed_zeros_and_nans_follow_numpy() {
    differential(&source("f32", true), float_pairs(true), &check_floats);
}

#[test]
fn f64_max_min_of_signed_zeros_and_nans_follow_numpy() {
    differential(&source("f64", true), float_pairs(false), &check_floats);
}

/// The reference's corner cases, and the interpreter and native code on the same pairs
/// against values written out here (not computed by the reference).
#[test]
fn signed_zero_ties_give_the_second_operand() {
    assert!(!reference_picks_a(-0.0, 0.0, true));
    assert!(!reference_picks_a(0.0, -0.0, false));
    assert!(reference_picks_a(f64::NAN, 1.0, true));
    assert!(!reference_picks_a(1.0, f64::NAN, true));
    assert_eq!(
        reference_div_rem(-7673562495525745938, 5568713776439957071, 64),
        (-2, 3463865057354168204)
    );
    // (a, b, max(a, b), min(a, b)): on a tie or a NaN `b`, the result is `b`.
    let nan = f64::NAN;
    let cases = [
        (-0.0, 0.0, 0.0, 0.0),
        (0.0, -0.0, -0.0, -0.0),
        (nan, 1.0, nan, nan),
        (1.0, nan, nan, nan),
    ];
    let column = |k: usize| -> Vec<f64> {
        (0..N)
            .map(|i| {
                let c = cases[i % cases.len()];
                [c.0, c.1, c.2, c.3][k]
            })
            .collect()
    };
    let (a, b, mx, mn) = (column(0), column(1), column(2), column(3));
    let check = |_: &Data, _: &Data, got: &HashMap<String, Tensor>, who: &str| {
        for (sink, want) in [("mx", &mx), ("mn", &mn)] {
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            let have: Vec<f64> = floats(&got[sink].data).iter().map(|x| x.0).collect();
            if bits(&have) != bits(want) {
                return Err(format!("{who}: @{sink} is {:?}, want {want:?}", &have[..4]));
            }
        }
        Ok(())
    };
    fixed_batch(&source("f64", true), (Data::F64(a), Data::F64(b)), &check);
    let (a, b) = (-7673562495525745938i64, 5568713776439957071i64);
    let check = |_: &Data, _: &Data, got: &HashMap<String, Tensor>, who: &str| {
        let want = [("q", -2), ("r", 3463865057354168204), ("mx", b), ("mn", a)];
        for (sink, v) in want {
            if ints(&got[sink].data) != vec![v; N] {
                return Err(format!("{who}: @{sink} is not {v} everywhere"));
            }
        }
        Ok(())
    };
    fixed_batch(
        &source("i64", false),
        (Data::I64(vec![a; N]), Data::I64(vec![b; N])),
        &check,
    );
}
