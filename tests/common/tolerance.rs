//! The native backend's float contract with the interpreter (docs/teg.md §5.3), shared by the
//! differential tests and the fuzzer.
//!
//! Per element: `|native − interp| ≤ 1e-4·|interp| + 1e-5·(1 + rms)`, where `rms` is the root
//! mean square of the sink's finite interpreter values. The relative term covers the math
//! polynomials (a few ulps); the term scaled by the sink covers reductions, whose rounding
//! (fused multiply-adds, partial sums) differs from the interpreter's by a few ulps of the
//! *partial sums*, not of the result: a dot product that cancels to 0.08 from terms of size
//! 30 is off by ~1e-5 in both, whichever rounds "right".

use tapc_runtime::{Data, Tensor};

pub const RTOL: f64 = 1e-4;
pub const ATOL: f64 = 1e-5;

/// The sink's scale: 1 + the root mean square of its finite values.
pub fn scale(want: &[f64]) -> f64 {
    let finite: Vec<f64> = want.iter().copied().filter(|x| x.is_finite()).collect();
    if finite.is_empty() {
        return 1.0;
    }
    1.0 + (finite.iter().map(|x| x * x).sum::<f64>() / finite.len() as f64).sqrt()
}

/// Whether native value `b` is within tolerance of interpreter value `a` (NaN matches NaN;
/// infinities must be equal) in a sink of scale `s`.
pub fn close(a: f64, b: f64, s: f64) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a.is_infinite() || b.is_infinite() {
        return a == b;
    }
    (a - b).abs() <= RTOL * a.abs() + ATOL * s
}

/// The first element where `got` breaks the contract with `want` (floats within tolerance,
/// integers and bools exact); `Some(0)` when the dtypes differ.
pub fn first_mismatch(want: &Tensor, got: &Tensor) -> Option<usize> {
    let float = |a: Vec<f64>, b: Vec<f64>| {
        let s = scale(&a);
        a.iter().zip(&b).position(|(&x, &y)| !close(x, y, s))
    };
    match (&want.data, &got.data) {
        (Data::F32(_), Data::F32(_)) | (Data::F64(_), Data::F64(_)) => {
            float(super::f64s(want), super::f64s(got))
        }
        (Data::I32(a), Data::I32(b)) => a.iter().zip(b).position(|(x, y)| x != y),
        (Data::I64(a), Data::I64(b)) => a.iter().zip(b).position(|(x, y)| x != y),
        (Data::Bool(a), Data::Bool(b)) => a.iter().zip(b).position(|(x, y)| x != y),
        _ => Some(0),
    }
}
