//! Low-precision contractions on dot-product instructions (`vdpbf16ps`, `vpdpbusd`) and on the
//! portable path (`--dot-products=portable`, what a host without them runs), both against the
//! interpreter at odd and prime shapes (K not a multiple of 2 or 4):
//!
//! - bf16 × bf16 → f32 (and → bf16) within the tolerance docs/teg.md §12 promises, computed per
//!   element from the inputs: `2·γ_K·Σ|a·b|` plus the products with a subnormal factor plus
//!   `K·2^-125`, plus half a bf16 ulp of each side for a bf16 result;
//! - u8 × i8 → i32 (either operand order) exactly, over the whole byte range, including a sum
//!   that wraps past i32's MAX (the non-saturating instruction);
//! - the fast path is compiled exactly when the host has the instruction and it is allowed.

use crate::common;
use crate::common::rng::Rng;
use std::collections::HashMap;
use tapc::codegen::{DotProducts, Options as CodegenOptions};
use tapc_runtime::exec::Options;
use tapc_runtime::{bf16, Data, Tensor};

/// Odd and prime shapes `(m, k, n)`: single rows and columns, K odd or not a multiple of 4,
/// partial panels (n = 65, 129) and partial row blocks.
const SHAPES: [(usize, usize, usize); 8] = [
    (1, 1, 1),
    (3, 17, 31),
    (17, 3, 65),
    (31, 65, 17),
    (6, 33, 64),
    (65, 31, 129),
    (13, 2, 3),
    (7, 130, 66),
];

/// `c[i, j] = sum[k](to(a[i, k]) * to(b[k, j]))` (operands in `order`), cast to `out` when it
/// differs from `to`.
fn program(
    ad: &str,
    bd: &str,
    to: &str,
    out: &str,
    swap: bool,
    (m, k, n): (usize, usize, usize),
) -> String {
    let (x, y) = ("a[i, k]", "b[k, j]");
    let (x, y) = if swap { (y, x) } else { (x, y) };
    let sum = format!("sum[k]({to}({x}) * {to}({y}))");
    let value = if out == to {
        sum
    } else {
        format!("{out}({sum})")
    };
    format!(
        "op @mm(a: {ad}[M, K], b: {bd}[K, N]) -> (c: {out}[M, N]) {{
  c[i, j] = {value}
}}
graph @g {{
  %a = source @a : {ad}[{m}, {k}]
  %b = source @b : {bd}[{k}, {n}]
  %c = apply @mm(%a, %b)
  sink @c %c
}}
"
    )
}

/// Random inputs: bf16 in [-2, 2) with a few subnormals and zeros, bytes over their range.
fn inputs(m: &tapc::ir::Module, seed: u64) -> HashMap<String, Tensor> {
    let mut rng = Rng(seed);
    let mut out = HashMap::new();
    for (name, ty, _) in m.graphs[0].sources() {
        let shape: Vec<usize> = ty.shape.iter().map(|&d| d as usize).collect();
        let n: usize = shape.iter().product();
        let data = match ty.dtype {
            tapc_runtime::DType::BF16 => Data::BF16(
                (0..n)
                    .map(|_| match rng.below(16) {
                        0 => bf16::from_bits(1 + rng.below(0x7f) as u16),
                        1 => bf16::from_f64(0.0),
                        _ => bf16::from_f64(rng.uniform(-2.0, 2.0)),
                    })
                    .collect(),
            ),
            tapc_runtime::DType::U8 => Data::U8((0..n).map(|_| rng.below(256) as u8).collect()),
            tapc_runtime::DType::I8 => {
                Data::I8((0..n).map(|_| rng.below(256) as u8 as i8).collect())
            }
            d => panic!("no inputs of {d:?} here"),
        };
        out.insert(name.to_string(), Tensor::new(shape, data).unwrap());
    }
    out
}

/// The program's one sink: by the interpreter, then natively with `dot` on 1 and 2 threads.
fn runs(src: &str, ins: &HashMap<String, Tensor>) -> (Tensor, Vec<(String, Tensor)>) {
    let (m, facts) = common::compile_ok("lowp", src);
    let want = tapc::interp::run(&m, &m.graphs[0], &facts[0], ins)
        .unwrap_or_else(|d| panic!("{}", d.message))
        .remove(0)
        .1;
    let mut got = Vec::new();
    for (dot, label) in [
        (DotProducts::Auto, "auto"),
        (DotProducts::Portable, "portable"),
    ] {
        let copts = CodegenOptions {
            dot_products: dot,
            ..Default::default()
        };
        for threads in [1, 2] {
            let opts = Options {
                threads,
                record: false,
            };
            let r = tapc::codegen::run_jit(&m, 0, &facts[0], ins, &copts, &opts)
                .unwrap_or_else(|d| panic!("{}", d.message))
                .0
                .remove(0)
                .1;
            got.push((format!("{label}, {threads} threads"), r));
        }
    }
    (want, got)
}

fn f64s(t: &Tensor) -> Vec<f64> {
    common::f64s(t)
}

/// The bound of docs/teg.md §12 for every output element of `a · b` (`m × k` times `k × n`).
fn bounds(a: &[f64], b: &[f64], (m, k, n): (usize, usize, usize)) -> Vec<f64> {
    let u = 2f64.powi(-24);
    let gamma = k as f64 * u / (1.0 - k as f64 * u);
    let tiny = |x: f64| x != 0.0 && x.abs() < 2f64.powi(-126);
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let (mut s, mut flushed) = (0.0, 0.0);
            for q in 0..k {
                let (x, y) = (a[i * k + q], b[q * n + j]);
                s += (x * y).abs();
                if tiny(x) || tiny(y) {
                    flushed += (x * y).abs();
                }
            }
            out[i * n + j] = 2.0 * gamma * s + flushed + k as f64 * 2f64.powi(-125);
        }
    }
    out
}

#[test]
fn bf16_contractions_stay_within_the_stated_tolerance_on_both_paths() {
    let mut compared = 0;
    for (shape, out, swap) in SHAPES
        .iter()
        .flat_map(|&s| [(s, "f32", false), (s, "bf16", true)])
    {
        let src = program("bf16", "bf16", "f32", out, swap, shape);
        let (m, _) = common::compile_ok("lowp", &src);
        let ins = inputs(&m, 0x9e37_79b9_7f4a_7c15 ^ shape.1 as u64);
        let bound = bounds(&f64s(&ins["a"]), &f64s(&ins["b"]), shape);
        let (want, got) = runs(&src, &ins);
        let want = f64s(&want);
        for (label, g) in &got {
            for (e, (&w, &x)) in want.iter().zip(&f64s(g)).enumerate() {
                let round = if out == "bf16" {
                    2f64.powi(-8) * 1.01 * (w.abs() + x.abs())
                } else {
                    0.0
                };
                assert!(
                    (w - x).abs() <= bound[e] + round,
                    "{shape:?} -> {out}, {label}: element {e} is {x}, the interpreter's {w}, \
                     bound {}",
                    bound[e] + round
                );
                compared += 1;
            }
        }
    }
    let per_path: usize = SHAPES.iter().map(|(m, _, n)| 2 * m * n).sum();
    assert_eq!(compared, 4 * per_path);
}

#[test]
fn u8_i8_contractions_equal_the_interpreter_on_both_paths() {
    let mut compared = 0;
    for (shape, (ad, bd)) in SHAPES
        .iter()
        .flat_map(|&s| [(s, ("u8", "i8")), (s, ("i8", "u8"))])
    {
        let src = program(ad, bd, "i32", "i32", shape.0 % 2 == 1, shape);
        let (m, _) = common::compile_ok("lowp", &src);
        let ins = inputs(&m, 0x2545_f491_4f6c_dd1d ^ shape.1 as u64);
        let (want, got) = runs(&src, &ins);
        for (label, g) in &got {
            assert_eq!(g, &want, "{ad} x {bd} at {shape:?}, {label}");
            compared += g.data.len();
        }
    }
    let per_path: usize = SHAPES.iter().map(|(m, _, n)| 2 * m * n).sum();
    assert_eq!(compared, 4 * per_path);
}

/// 70,001 products of 255 × 127 sum to 2,267,057,385, past i32's MAX: the sum wraps (as the
/// interpreter's), it does not saturate at MAX (as `vpdpbusds` would).
#[test]
fn a_u8_i8_sum_wraps_and_does_not_saturate() {
    let (k, n) = (70_001, 17);
    let src = program("u8", "i8", "i32", "i32", false, (1, k, n));
    let mut ins = HashMap::new();
    ins.insert(
        "a".into(),
        Tensor::new(vec![1, k], Data::U8(vec![255; k])).unwrap(),
    );
    ins.insert(
        "b".into(),
        Tensor::new(vec![k, n], Data::I8(vec![127; k * n])).unwrap(),
    );
    let wrapped = (70_001i64 * 255 * 127 - (1i64 << 32)) as i32;
    assert!(wrapped < 0);
    let (want, got) = runs(&src, &ins);
    assert_eq!(want.data, Data::I32(vec![wrapped; n]));
    for (label, g) in got {
        assert_eq!(g.data, Data::I32(vec![wrapped; n]), "{label}");
    }
}

/// The optimised LLVM IR of `src` with `dot`.
fn llvm_ir(src: &str, dot: DotProducts) -> String {
    let (m, facts) = common::compile_ok("lowp", src);
    let dir = common::scratch("lowp-ir");
    let out = dir.join("k.ll");
    let copts = CodegenOptions {
        dot_products: dot,
        ..Default::default()
    };
    tapc::codegen::emit_to_file(
        &m,
        0,
        &facts[0],
        tapc::codegen::EmitKind::Llvm,
        &out,
        &copts,
        tapc::codegen::Runtime::Local,
        &[],
    )
    .unwrap_or_else(|d| panic!("{}", d.message));
    let ir = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_dir_all(dir);
    ir
}

#[test]
fn the_dot_instructions_are_used_exactly_when_the_host_has_them_and_they_are_allowed() {
    let host = tapc::codegen::target::host().unwrap();
    let cases = [
        (
            program("bf16", "bf16", "f32", "f32", false, (9, 33, 40)),
            "llvm.x86.avx512bf16.dpbf16ps.512",
            host.dot.bf16,
        ),
        (
            program("bf16", "bf16", "f32", "bf16", false, (9, 33, 40)),
            "llvm.x86.avx512bf16.dpbf16ps.512",
            host.dot.bf16,
        ),
        (
            program("u8", "i8", "i32", "i32", false, (9, 33, 40)),
            "llvm.x86.avx512.vpdpbusd.512",
            host.dot.vnni,
        ),
        // Not a contraction of the instruction's dtypes: an f32 matmul.
        (
            program("f32", "f32", "f32", "f32", false, (9, 33, 40)),
            "llvm.x86.avx512",
            false,
        ),
    ];
    for (src, intrinsic, has) in &cases {
        assert_eq!(
            llvm_ir(src, DotProducts::Auto).contains(intrinsic),
            *has,
            "{intrinsic} in\n{src}"
        );
        assert!(
            !llvm_ir(src, DotProducts::Portable).contains(intrinsic),
            "{intrinsic} in\n{src}"
        );
    }
}
