//! The f32 polynomials of the native math (`erf`, `tanh`, `exp` evaluated in f32 for GELU and
//! softmax, `src/codegen/math.rs`) against the interpreter, the oracle (f64 libm rounded to
//! f32), over a dense sweep of [-10, 10] — every 1021st f32 bit pattern of each sign — plus
//! ±0, subnormals, the smallest normal, ±inf and NaN, on 1 and 2 threads. Each result must be
//! within the ulps `docs/teg.md` §5.2 documents (measured against the rounded oracle, so one
//! half ulp above the bound against the exact value), NaN exactly where the interpreter gives
//! NaN, and zeros and infinities identical, sign included.

use crate::common;

use std::collections::HashMap;
use tapc_runtime::exec::Options;
use tapc_runtime::{Data, Tensor};

/// Functions and their allowed distance from the interpreter's f32 result, in f32 ulps.
const FUNCS: [(&str, u32); 3] = [("erf", 2), ("tanh", 2), ("exp", 2)];

/// The sweep: specials, then every 1021st positive f32 below 10 and its negation.
fn arguments() -> Vec<f32> {
    let mut xs = vec![
        0.0,
        -0.0,
        f32::from_bits(1),
        -f32::from_bits(1),
        1e-40,
        -1e-40,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        0.921_875,
        -0.921_875,
        4.0,
        -4.0,
    ];
    let top = 10f32.to_bits();
    for b in (0..=top).step_by(1021) {
        let x = f32::from_bits(b);
        xs.extend([x, -x]);
    }
    xs
}

/// Distance in f32 ulps between two finite floats (counted through zero).
fn ulps_apart(a: f32, b: f32) -> u64 {
    let key = |v: f32| {
        let bits = v.to_bits() as i64;
        if bits < 0x8000_0000 {
            bits
        } else {
            0x8000_0000 - bits
        }
    };
    key(a).abs_diff(key(b))
}

fn source(n: usize) -> String {
    let outs: Vec<String> = FUNCS.iter().map(|(f, _)| format!("{f}: f32[N]")).collect();
    let body: Vec<String> = FUNCS
        .iter()
        .map(|(f, _)| format!("  {f}[i] = {f}(x[i])"))
        .collect();
    let names: Vec<String> = FUNCS.iter().map(|(f, _)| format!("%{f}")).collect();
    let sinks: Vec<String> = FUNCS
        .iter()
        .map(|(f, _)| format!("  sink @{f} %{f}"))
        .collect();
    format!(
        "op @f(x: f32[N]) -> ({}) {{\n{}\n}}\ngraph @g {{\n  %x = source @x : f32[{n}]\n  {} = apply @f(%x)\n{}\n}}\n",
        outs.join(", "),
        body.join("\n"),
        names.join(", "),
        sinks.join("\n")
    )
}

fn f32s(t: &Tensor) -> Vec<f32> {
    match &t.data {
        Data::F32(v) => v.clone(),
        other => panic!("expected f32, got {:?}", other.dtype()),
    }
}

/// Checks `got` against the interpreter's `want`; returns the worst distance and where.
fn compare(name: &str, bound: u32, xs: &[f32], got: &[f32], want: &[f32]) -> (u64, f32) {
    let mut worst = (0, 0.0);
    for ((&x, &g), &w) in xs.iter().zip(got).zip(want) {
        let what = || format!("{name}({x:e}): native {g:e}, interpreter {w:e}");
        if w.is_nan() || g.is_nan() {
            assert!(w.is_nan() && g.is_nan(), "{}", what());
            continue;
        }
        if w == 0.0 || w.is_infinite() || g.is_infinite() {
            assert_eq!(g.to_bits(), w.to_bits(), "{}", what());
            continue;
        }
        let d = ulps_apart(g, w);
        assert!(d <= u64::from(bound), "{d} ulps > {bound}: {}", what());
        if d > worst.0 {
            worst = (d, x);
        }
    }
    worst
}

#[test]
fn f32_erf_tanh_exp_match_the_interpreter_over_a_dense_sweep_on_1_and_2_threads() {
    let xs = arguments();
    let n = xs.len();
    let (m, facts) = common::compile_ok("fast_math", &source(n));
    let x = Tensor::new(vec![n], Data::F32(xs.clone())).unwrap();
    let inputs = HashMap::from([("x".to_string(), x)]);
    let interp: HashMap<String, Tensor> = common::run(&m, &facts, 0, &inputs).into_iter().collect();
    let mut checked = 0;
    for threads in [1, 2] {
        let opts = Options {
            threads,
            record: false,
        };
        let (native, _) =
            tapc::codegen::run_jit(&m, 0, &facts[0], &inputs, &Default::default(), &opts).unwrap();
        for (name, bound) in FUNCS {
            let got = f32s(&native.iter().find(|(s, _)| s == name).unwrap().1);
            let want = f32s(&interp[name]);
            let (d, at) = compare(name, bound, &xs, &got, &want);
            println!("{name} f32, {threads} threads: at most {d} ulps from the interpreter (at x = {at:e})");
            checked += got.len();
        }
    }
    // Every argument of every function on both thread counts, the sweep itself dense.
    assert_eq!(checked, 2 * FUNCS.len() * n);
    assert!(n > 2_000_000, "{n} arguments");
}

/// `erf` reaches ±1 exactly where f32 rounds it there, keeps the sign of zeros and of tiny
/// arguments (`erf(x) ≈ 1.128·x` down into the subnormals), in the interpreter and natively.
#[test]
fn f32_erf_is_exactly_one_far_out_and_odd_near_zero() {
    let xs = [
        3.92f32, 4.0, 9.5, -4.0, -1e30, 1e-30, -1e-30, 1e-40, -0.0, 0.0,
    ];
    let n = xs.len();
    let src = format!(
        "op @f(x: f32[N]) -> (y: f32[N]) {{\n  y[i] = erf(x[i])\n}}\ngraph @g {{\n  %x = source @x : f32[{n}]\n  %y = apply @f(%x)\n  sink @y %y\n}}\n"
    );
    let (m, facts) = common::compile_ok("erf_edges", &src);
    let inputs = HashMap::from([(
        "x".to_string(),
        Tensor::new(vec![n], Data::F32(xs.to_vec())).unwrap(),
    )]);
    let interp = f32s(&common::run(&m, &facts, 0, &inputs)["y"]);
    let opts = Options {
        threads: 1,
        record: false,
    };
    let (native, _) =
        tapc::codegen::run_jit(&m, 0, &facts[0], &inputs, &Default::default(), &opts).unwrap();
    let native = f32s(&native[0].1);
    let two_over_sqrt_pi = std::f64::consts::FRAC_2_SQRT_PI;
    let want: Vec<f32> = xs
        .iter()
        .map(|&x| match x {
            x if x.abs() >= 3.92 => 1f32.copysign(x),
            x => (two_over_sqrt_pi * f64::from(x)) as f32,
        })
        .collect();
    for i in 0..n {
        let what = format!(
            "erf({:e}): native {:e}, interpreter {:e}, want {:e}",
            xs[i], native[i], interp[i], want[i]
        );
        assert_eq!(interp[i].to_bits(), want[i].to_bits(), "{what}");
        if want[i].abs() == 1.0 || want[i] == 0.0 {
            assert_eq!(native[i].to_bits(), want[i].to_bits(), "{what}");
        } else {
            // `x + x·P(0)` rounds twice: within one ulp, with the sign of x.
            assert_eq!(
                native[i].is_sign_negative(),
                xs[i].is_sign_negative(),
                "{what}"
            );
            assert!(ulps_apart(native[i], want[i]) <= 1, "{what}");
        }
    }
}
