//! The native backend's float contract with the interpreter (docs/teg.md §5.3), shared by the
//! differential tests and the fuzzer, per dtype.
//!
//! Per element: `|native − interp| ≤ rtol·|interp| + atol·(1 + rms)`, where `rms` is the root
//! mean square of the sink's finite interpreter values. The relative term covers the math
//! polynomials (a few ulps); the term scaled by the sink covers reductions, whose rounding
//! (fused multiply-adds, partial sums) differs from the interpreter's by a few ulps of the
//! *partial sums*, not of the result: a dot product that cancels to 0.08 from terms of size
//! 30 is off by ~1e-5 in f32 in both, whichever rounds "right". Both terms are set in units of
//! the dtype's own rounding, so an f64 result is held to f64 precision, not to f32's.

use tapc_runtime::{Data, Tensor};

/// One float dtype's bound: `rtol·|interp| + atol·(1 + rms)`.
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    pub rtol: f64,
    pub atol: f64,
}

/// f32: about 800 ulps relative (an ulp is 2⁻²³ ≈ 1.2e-7) and 80 ulps of the sink's scale.
pub const F32: Bound = Bound {
    rtol: 1e-4,
    atol: 1e-5,
};

/// f64: about 4,500 ulps relative (an ulp is 2⁻⁵² ≈ 2.2e-16; `pow` is allowed 2,048, the other
/// functions 4 at most: docs/teg.md §5.2) and 450 ulps of the sink's scale.
pub const F64: Bound = Bound {
    rtol: 1e-12,
    atol: 1e-13,
};

/// f16: about 8 ulps relative (an ulp is 2⁻¹⁰ ≈ 1e-3) and 1 ulp of the sink's scale: f16
/// rounds after every operation in both, so only the math polynomials and reassociated sums
/// differ.
pub const F16: Bound = Bound {
    rtol: 8e-3,
    atol: 1e-3,
};

/// bf16: about 4 ulps relative (an ulp is 2⁻⁷ ≈ 7.8e-3) and 1 ulp of the sink's scale.
pub const BF16: Bound = Bound {
    rtol: 3e-2,
    atol: 8e-3,
};

/// The sink's scale: 1 + the root mean square of its finite values.
pub fn scale(want: &[f64]) -> f64 {
    let finite: Vec<f64> = want.iter().copied().filter(|x| x.is_finite()).collect();
    if finite.is_empty() {
        return 1.0;
    }
    1.0 + (finite.iter().map(|x| x * x).sum::<f64>() / finite.len() as f64).sqrt()
}

/// Whether native value `b` is within `bound` of interpreter value `a` (NaN matches NaN;
/// infinities must be equal) in a sink of scale `s`.
pub fn close(a: f64, b: f64, s: f64, bound: Bound) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a.is_infinite() || b.is_infinite() {
        return a == b;
    }
    (a - b).abs() <= bound.rtol * a.abs() + bound.atol * s
}

/// The first element where `got` breaks the contract with `want` (floats within their
/// dtype's bound, integers and bools exact); `Some(0)` when the dtypes differ.
pub fn first_mismatch(want: &Tensor, got: &Tensor) -> Option<usize> {
    let float = |bound: Bound| {
        let (a, b) = (super::f64s(want), super::f64s(got));
        let s = scale(&a);
        a.iter().zip(&b).position(|(&x, &y)| !close(x, y, s, bound))
    };
    match (&want.data, &got.data) {
        (Data::F32(_), Data::F32(_)) => float(F32),
        (Data::F64(_), Data::F64(_)) => float(F64),
        (Data::F16(_), Data::F16(_)) => float(F16),
        (Data::BF16(_), Data::BF16(_)) => float(BF16),
        // Integers and bools: the same data (a `Data` compares element by element).
        (a, b) if a.dtype() == b.dtype() => (a != b).then(|| {
            let (x, y) = (super::f64s(want), super::f64s(got));
            x.iter().zip(&y).position(|(p, q)| p != q).unwrap_or(0)
        }),
        _ => Some(0),
    }
}
