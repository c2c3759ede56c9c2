//! Accuracy of the native math functions (`src/codegen/math.rs`): each function of f32 and of
//! f64 runs natively (JIT, vectorised kernels) over a sweep of its whole domain — strided
//! f32 bit patterns (so every binade, the subnormals, ±0, ±inf and NaNs), random f64 bit
//! patterns, dense samples of the interesting ranges, and edge values — and is compared with
//! Rust std / `libm` in f64. The test prints the worst error in ulps of the result's dtype
//! and fails when it exceeds the bound documented in `docs/teg.md`, or when NaN-ness, the
//! sign of a zero or an infinity differs.

use crate::common;

use common::Rng;
use std::collections::HashMap;
use tapc_runtime::exec::Options;
use tapc_runtime::{Data, Tensor};

struct Case {
    name: &'static str,
    reference: fn(f64, f64) -> f64,
    /// Documented worst error in ulps, for f32 and for f64.
    bound: (f64, f64),
    /// Whether the sweep of the second argument matters (`pow`).
    binary: bool,
}

const CASES: &[Case] = &[
    Case {
        name: "exp",
        reference: |x, _| x.exp(),
        bound: (1.0, 1.0),
        binary: false,
    },
    Case {
        name: "log",
        reference: |x, _| x.ln(),
        bound: (1.0, 1.0),
        binary: false,
    },
    Case {
        name: "tanh",
        reference: |x, _| x.tanh(),
        bound: (2.0, 3.0),
        binary: false,
    },
    Case {
        name: "sin",
        reference: |x, _| x.sin(),
        bound: (1.0, 2.0),
        binary: false,
    },
    Case {
        name: "cos",
        reference: |x, _| x.cos(),
        bound: (1.0, 2.0),
        binary: false,
    },
    Case {
        name: "erf",
        reference: |x, _| libm::erf(x),
        bound: (1.5, 4.0),
        binary: false,
    },
    Case {
        name: "atan",
        reference: |x, _| x.atan(),
        bound: (1.0, 3.0),
        binary: false,
    },
    Case {
        name: "asin",
        reference: |x, _| x.asin(),
        bound: (1.0, 4.0),
        binary: false,
    },
    Case {
        name: "acos",
        reference: |x, _| x.acos(),
        bound: (1.0, 4.0),
        binary: false,
    },
    Case {
        name: "pow",
        reference: |x, y| x.powf(y),
        bound: (1.0, 2048.0),
        binary: true,
    },
];

const EDGES: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    -0.5,
    2.0,
    -2.0,
    3.0,
    -3.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    f64::MIN_POSITIVE,
    -f64::MIN_POSITIVE,
    5e-324,
    -5e-324,
    f32::MIN_POSITIVE as f64,
    1e-45,
    f32::MAX as f64,
    f64::MAX,
    -f64::MAX,
    709.78,
    -745.0,
    88.7,
    -103.9,
    1.5,
    6.0,
    1e5,
    262_144.0,
    262_145.0,
    1e22,
    std::f64::consts::FRAC_PI_2,
    std::f64::consts::PI,
];

/// The first arguments: edges, then (f32) every 4093rd bit pattern, or (f64) random bit
/// patterns, then uniform samples of [-8, 8], [-1, 1] and [-800, 800].
fn first_args(f32_sweep: bool, rng: &mut Rng) -> Vec<f64> {
    let mut xs: Vec<f64> = EDGES.to_vec();
    if f32_sweep {
        xs.extend(
            (0..=u32::MAX)
                .step_by(4093)
                .map(|b| f32::from_bits(b) as f64),
        );
    } else {
        xs.extend((0..400_000).map(|_| f64::from_bits(rng.next())));
    }
    for (lo, hi, n) in [
        (-8.0, 8.0, 200_000),
        (-1.0, 1.0, 100_000),
        (-800.0, 800.0, 50_000),
    ] {
        xs.extend((0..n).map(|_| rng.uniform(lo, hi)));
    }
    xs
}

/// Exponents for `pow`: integers (odd and even), halves, small reals, ±inf, NaN, ±0.
fn second_args(n: usize, rng: &mut Rng) -> Vec<f64> {
    let special = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.0,
        3.0,
        -3.0,
        0.5,
        -0.5,
        f64::INFINITY,
    ];
    (0..n)
        .map(|i| match i % 5 {
            0 => special[(rng.next() % special.len() as u64) as usize],
            1 => (rng.next() % 41) as f64 - 20.0,
            2 => rng.uniform(-4.0, 4.0),
            3 => rng.uniform(-60.0, 60.0),
            _ => [f64::NEG_INFINITY, f64::NAN, 0.25, 7.0][(rng.next() % 4) as usize],
        })
        .collect()
}

/// The spacing of the dtype's floats at `r`'s magnitude (subnormal spacing at the bottom).
fn ulp(r: f64, f32_dtype: bool) -> f64 {
    let a = if r.is_finite() { r.abs() } else { f64::MAX };
    if f32_dtype {
        let a = (a as f32).min(f32::MAX);
        let min = f32::from_bits(1) as f64;
        if a == f32::MAX {
            return min.max((f32::MAX - f32::from_bits(f32::MAX.to_bits() - 1)) as f64);
        }
        let next = f32::from_bits(a.to_bits() + 1) as f64;
        min.max(next - a as f64)
    } else {
        if a == f64::MAX {
            return a - f64::from_bits(a.to_bits() - 1);
        }
        (f64::from_bits(a.to_bits() + 1) - a).max(5e-324)
    }
}

fn run_native(src: &str, inputs: HashMap<String, Tensor>) -> Tensor {
    let (m, facts) = common::compile_ok("math", src);
    let opts = Options {
        threads: 2,
        record: false,
    };
    let (mut sinks, _) =
        tapc::codegen::run_jit(&m, 0, &facts[0], &inputs, &Default::default(), &opts).unwrap();
    sinks.remove(0).1
}

/// Worst ulp error of `case` over the sweep; panics on a class mismatch.
fn sweep(case: &Case, f32_dtype: bool) -> (f64, f64, f64) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let xs = first_args(f32_dtype, &mut rng);
    let ys = second_args(xs.len(), &mut rng);
    let (dt, n) = (if f32_dtype { "f32" } else { "f64" }, xs.len());
    let (params, args, call) = if case.binary {
        (
            format!("x: {dt}[N], p: {dt}[N]"),
            "%x, %p",
            format!("{}(x[i], p[i])", case.name),
        )
    } else {
        (format!("x: {dt}[N]"), "%x", format!("{}(x[i])", case.name))
    };
    let src = format!(
        "op @f({params}) -> (y: {dt}[N]) {{\n  y[i] = {call}\n}}\n\
         graph @g {{\n  %x = source @x : {dt}[{n}]\n  %p = source @p : {dt}[{n}]\n  \
         %y = apply @f({args})\n  sink @y %y\n}}\n"
    );
    let tensor = |v: &[f64]| {
        let data = if f32_dtype {
            Data::F32(v.iter().map(|&x| x as f32).collect())
        } else {
            Data::F64(v.to_vec())
        };
        Tensor::new(vec![n], data).unwrap()
    };
    let inputs = HashMap::from([
        ("x".to_string(), tensor(&xs)),
        ("p".to_string(), tensor(&ys)),
    ]);
    let got = common::f64s(&run_native(&src, inputs));
    let mut worst = (0.0, f64::NAN, f64::NAN);
    for i in 0..n {
        // The argument as the kernel saw it (rounded to the dtype).
        let round = |v: f64| if f32_dtype { v as f32 as f64 } else { v };
        let (x, y) = (round(xs[i]), round(ys[i]));
        let want = round((case.reference)(x, if case.binary { y } else { 0.0 }));
        let exact = (case.reference)(x, if case.binary { y } else { 0.0 });
        let g = got[i];
        let what = || {
            format!(
                "{}({x:e}{}) of {dt}: got {g:e}, want {want:e}",
                case.name,
                if case.binary {
                    format!(", {y:e}")
                } else {
                    String::new()
                }
            )
        };
        if want.is_nan() || g.is_nan() {
            assert!(want.is_nan() && g.is_nan(), "{}", what());
            continue;
        }
        if want.is_infinite() || g.is_infinite() || want == 0.0 {
            if g == want && g.is_sign_negative() == want.is_sign_negative() {
                continue;
            }
            // A finite result next to an infinite or zero one: measure it in ulps as usual.
            assert!(g.is_finite() || want.is_finite(), "{}", what());
            assert!(
                g.is_sign_negative() == want.is_sign_negative(),
                "sign: {}",
                what()
            );
        }
        let err = if exact.is_finite() {
            (g - exact).abs() / ulp(want, f32_dtype)
        } else {
            (g - want).abs() / ulp(g, f32_dtype)
        };
        if err > worst.0 {
            worst = (err, x, y);
        }
    }
    worst
}

fn check(f32_dtype: bool) {
    let mut failures = Vec::new();
    for case in CASES {
        let (err, x, y) = sweep(case, f32_dtype);
        let bound = if f32_dtype {
            case.bound.0
        } else {
            case.bound.1
        };
        let dt = if f32_dtype { "f32" } else { "f64" };
        println!(
            "{:>5} {dt}: max {err:.3} ulp (bound {bound}) at x = {x:e}{}",
            case.name,
            if case.binary {
                format!(", y = {y:e}")
            } else {
                String::new()
            }
        );
        if err > bound {
            failures.push(format!(
                "{} {dt}: {err:.3} ulp > {bound} at x = {x:e}, y = {y:e}",
                case.name
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn f32_math_functions_are_within_their_documented_ulps_over_the_whole_domain() {
    check(true);
}

#[test]
fn f64_math_functions_are_within_their_documented_ulps_over_the_whole_domain() {
    check(false);
}

type Sinks = Vec<(String, Tensor)>;

/// The sinks of graph 0 of `src` on `inputs`, in the interpreter and natively (one thread).
fn interp_and_native(name: &str, src: &str, inputs: &HashMap<String, Tensor>) -> (Sinks, Sinks) {
    let (m, facts) = common::compile_ok(name, src);
    let interp = tapc::interp::run(&m, &m.graphs[0], &facts[0], inputs).unwrap();
    let opts = Options {
        threads: 1,
        record: false,
    };
    let (native, _) =
        tapc::codegen::run_jit(&m, 0, &facts[0], inputs, &Default::default(), &opts).unwrap();
    (interp, native)
}

/// Values known in closed form (or from tables), in the interpreter and natively.
#[test]
fn new_functions_give_known_values_in_the_interpreter_and_natively() {
    let src = "op @f(x: f64[N], p: f64[N]) -> (erf: f64[N], atan: f64[N], asin: f64[N], acos: f64[N], pow: f64[N]) {
  erf[i] = erf(x[i])
  atan[i] = atan(x[i])
  asin[i] = asin(x[i])
  acos[i] = acos(x[i])
  pow[i] = pow(x[i], p[i])
}
graph @g {
  %x = source @x : f64[5]
  %p = source @p : f64[5]
  %erf, %atan, %asin, %acos, %pow = apply @f(%x, %p)
  sink @erf %erf
  sink @atan %atan
  sink @asin %asin
  sink @acos %acos
  sink @pow %pow
}
";
    use std::f64::consts::{FRAC_PI_2, FRAC_PI_4, FRAC_PI_6, PI};
    let nan = f64::NAN;
    let x = [0.0, 1.0, -1.0, 0.5, -2.0];
    let p = [0.0, 10.0, 3.0, -1.0, 0.5];
    // erf(0.5) and erf(1) from Abramowitz & Stegun table 7.1; pow(-2, 0.5) is NaN (no real root).
    let want: [(&str, [f64; 5]); 5] = [
        (
            "erf",
            [
                0.0,
                0.842_700_792_949_714_9,
                -0.842_700_792_949_714_9,
                0.520_499_877_813_046_5,
                -0.995_322_265_018_952_7,
            ],
        ),
        (
            "atan",
            [
                0.0,
                FRAC_PI_4,
                -FRAC_PI_4,
                0.463_647_609_000_806_1,
                -1.107_148_717_794_090_4,
            ],
        ),
        ("asin", [0.0, FRAC_PI_2, -FRAC_PI_2, FRAC_PI_6, nan]),
        ("acos", [FRAC_PI_2, 0.0, PI, PI / 3.0, nan]),
        ("pow", [1.0, 1.0, -1.0, 2.0, nan]),
    ];
    let t = |v: [f64; 5]| Tensor::new(vec![5], Data::F64(v.to_vec())).unwrap();
    let inputs = HashMap::from([("x".to_string(), t(x)), ("p".to_string(), t(p))]);
    let (interp, native) = interp_and_native("known", src, &inputs);
    for (name, w) in want {
        let native = &native.iter().find(|(n, _)| n == name).unwrap().1;
        let interp = interp
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t)
            .unwrap();
        for (how, got) in [
            ("native", common::f64s(native)),
            ("interp", common::f64s(interp)),
        ] {
            for i in 0..5 {
                let ok = if w[i].is_nan() {
                    got[i].is_nan()
                } else {
                    (got[i] - w[i]).abs() <= 4e-16 * w[i].abs().max(1.0)
                };
                assert!(
                    ok,
                    "{how} {name}({}, {}) = {} but should be {}",
                    x[i], p[i], got[i], w[i]
                );
            }
        }
    }
}

/// `pow` of a power-of-two base and an integer exponent is an exact power of two: `inf` from
/// `2^1024` on (issue 23 item 11: natively `pow(2, 1024)` was `f64::MAX`), the subnormals
/// down to `2^-1074` and zero below, in f64 and f32, natively exactly as in the interpreter.
#[test]
fn pow_of_powers_of_two_overflows_to_inf_natively_as_in_the_interpreter() {
    let inf = f64::INFINITY;
    let cases: [(f64, f64, f64); 14] = [
        (2.0, 1024.0, inf),
        (4.0, 512.0, inf),
        (0.5, -1024.0, inf),
        (-2.0, 1025.0, -inf),
        (-2.0, 1024.0, inf),
        (2.0, 1023.0, 2f64.powi(1023)),
        (0.25, -510.0, 2f64.powi(1020)),
        (2.0, -1074.0, f64::from_bits(1)),
        (0.5, 1075.0, 0.0),
        (8.0, -341.0, 2f64.powi(-1023)),
        (2.0, 1e300, inf),
        (0.5, 1e300, 0.0),
        (2f64.powi(-1022), -1.0, 2f64.powi(1022)),
        (-0.5, 3.0, -0.125),
    ];
    let n = cases.len();
    let src = format!(
        "op @f(x: f64[N], p: f64[N]) -> (y: f64[N], z: f32[N]) {{
  y[i] = pow(x[i], p[i])
  z[i] = pow(f32(x[i]), f32(p[i]))
}}
graph @g {{
  %x = source @x : f64[{n}]
  %p = source @p : f64[{n}]
  %y, %z = apply @f(%x, %p)
  sink @y %y
  sink @z %z
}}
"
    );
    let col = |k: usize| {
        Tensor::new(
            vec![n],
            Data::F64(cases.iter().map(|c| [c.0, c.1][k]).collect()),
        )
    };
    let inputs = HashMap::from([
        ("x".to_string(), col(0).unwrap()),
        ("p".to_string(), col(1).unwrap()),
    ]);
    let (interp, native) = interp_and_native("pow2", &src, &inputs);
    let get = |outs: &[(String, Tensor)], name: &str| {
        common::f64s(&outs.iter().find(|(o, _)| o == name).unwrap().1)
    };
    for name in ["y", "z"] {
        let (nat, int) = (get(&native, name), get(&interp, name));
        for (i, &(x, p, want)) in cases.iter().enumerate() {
            let want = if name == "z" {
                (x as f32).powf(p as f32) as f64
            } else {
                want
            };
            assert_eq!(
                (nat[i].to_bits(), int[i].to_bits()),
                (want.to_bits(), want.to_bits()),
                "{name}: pow({x:e}, {p:e}): native {:e}, interpreter {:e}, want {want:e}",
                nat[i],
                int[i]
            );
        }
    }
}
