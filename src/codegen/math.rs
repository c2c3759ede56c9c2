//! Vectorisable math functions in LLVM IR: `exp`, `log`, `tanh`, `sin`, `cos`, `erf`, `atan`,
//! `asin`, `acos` and `pow` of f32 and f64, on scalars and `<lanes x T>` vectors alike.
//!
//! Each is a range reduction plus a polynomial (or a fixed-length continued fraction) made of
//! plain IEEE operations and selects, so the loop vectoriser keeps whole vectors and no libm
//! call is made per element. The one exception is `sin`/`cos` of |x| > 2^18, whose
//! Cody–Waite reduction would lose bits: a vector holding such a lane takes a cold branch that
//! calls libm lane by lane (and NaN/inf lanes take it too, which keeps the fast path free of
//! special cases).
//!
//! f64 is the working precision: f32 arguments are widened, computed in f64 and rounded once,
//! so f32 results are within 1 ulp (almost always correctly rounded), matching the
//! interpreter's "f64 libm, rounded to f32". The exceptions are f32 `exp`, `tanh` and `erf`,
//! evaluated in f32 (twice the lanes) because they are the hot functions of softmax and GELU:
//! Cephes `expf` and `tanhf`, and for `erf` two minimax polynomials of our own (below).
//! Measured accuracy of every function is in `docs/teg.md` §"Accuracy of math functions" and
//! checked by `tests/native/math.rs` (against libm) and `tests/native/fast_math.rs` (against
//! the interpreter).

use super::ops::{Gen, V};
use crate::ir::instance::Scalar;
use crate::ir::kernel::Func;
use crate::ir::DType;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, InstructionOpcode as Op};
use inkwell::{FloatPredicate as P, IntPredicate};
use std::f64::consts::{FRAC_2_PI, FRAC_PI_6, LOG2_E, SQRT_2};

const LN2_HI: f64 = 0.693_147_180_369_123_8;
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
/// π/2 in three parts (fdlibm's `pio2_1`, `pio2_2`, `pio2_2t`): the first two have 33 bits,
/// so `n * part` is exact for |n| < 2^20.
const PIO2: [f64; 3] = [
    1.570_796_326_734_125_6,
    6.077_100_506_303_966e-11,
    2.022_266_248_795_950_6e-21,
];
const PIO2_HI: f64 = std::f64::consts::FRAC_PI_2;
/// π/2 − `PIO2_HI`.
const PIO2_LO: f64 = 6.123_233_995_736_766e-17;
/// Past this |x|, `sin`/`cos` call libm (the Cody–Waite reduction needs |n| < 2^20).
const TRIG_FAST_MAX: f64 = 262_144.0;
const SQRT_3: f64 = 1.732_050_807_568_877_2;
const TAN_PI_12: f64 = 0.267_949_192_431_122_7;
/// f32 `erf`: below this |x|, `x + x·P(x²)`; above, `1 − e^(Q(|x|))`.
const ERF32_SPLIT: f64 = 0.921_875;
/// f32 `erf` of |x| ≥ this rounds to 1 (erfc(4) ≈ 1.5e-8 < 2^-25).
const ERF32_ONE: f64 = 4.0;
/// `P(s)` of f32 `erf` below the split, highest first: `erf(x)/x − 1` as a polynomial in
/// `s = x²` on [0, 0.85] (a Lawson-weighted minimax fit for relative error, 4e-10 before the
/// coefficients were rounded to f32).
const ERF32_SMALL: [f64; 7] = [
    8.370_100_113e-05,
    -8.142_704_028e-04,
    5.201_032_385e-03,
    -2.685_939_893e-02,
    1.128_369_570e-01,
    -3.761_263_490e-01,
    1.283_791_661e-01,
];
/// `Q(t)` of f32 `erf` above the split, highest first: `ln erfc(t)` on [0.921875, 4] (fitted
/// for the error it causes in `erf`, 5e-4 ulp before rounding to f32).
const ERF32_LARGE: [f64; 9] = [
    -4.377_902_201e-07,
    -1.547_489_410e-05,
    4.035_889_579e-04,
    -4.076_229_874e-03,
    2.494_118_363e-02,
    -1.080_700_308e-01,
    -6.334_986_091e-01,
    -1.129_453_540e+00,
    1.640_029_368e-04,
];
/// f64 `erf` switches from its Taylor series to the `erfc` continued fraction here.
const ERF_SPLIT: f64 = 1.5;
const ERF_TAYLOR_TERMS: usize = 28;
const ERFC_CF_TERMS: usize = 80;

/// `1/k!` for k = `from..=to`, highest first (a Horner list).
fn inv_factorials(from: usize, to: usize, step: usize, alternate: bool) -> Vec<f64> {
    let mut fact = 1.0f64;
    let mut out = Vec::new();
    for k in 1..=to {
        fact *= k as f64;
        if k >= from && (k - from).is_multiple_of(step) {
            let sign = if alternate && ((k - from) / step) % 2 == 1 {
                -1.0
            } else {
                1.0
            };
            out.push(sign / fact);
        }
    }
    out.reverse();
    out
}

impl<'ctx> Gen<'_, 'ctx> {
    /// `f` applied to float arguments of dtype `d`, or `None` when `f` is not one of the
    /// functions of this module.
    pub fn math(&self, f: Func, args: &[V<'ctx>], d: DType) -> Option<V<'ctx>> {
        match (f, d) {
            (Func::Exp, DType::F32) => return Some(self.exp_f32(args[0])),
            (Func::Tanh, DType::F32) => return Some(self.tanh_f32(args[0])),
            (Func::Erf, DType::F32) => return Some(self.erf_f32(args[0])),
            _ => {}
        }
        let wide: Vec<V<'ctx>> = args.iter().map(|&a| self.cast(a, d, DType::F64)).collect();
        let x = wide[0];
        let r = match f {
            Func::Exp => self.exp64(x),
            Func::Log => self.log64(x),
            Func::Tanh => self.tanh64(x),
            Func::Sin => self.sincos64(x, false),
            Func::Cos => self.sincos64(x, true),
            Func::Erf => self.erf64(x),
            Func::Atan => self.atan64(x),
            Func::Asin => self.asin64(x),
            Func::Acos => self.acos64(x),
            Func::Pow => {
                let (x, y) = self.both(x, wide[1]);
                self.pow64(x, y)
            }
            _ => return None,
        };
        Some(self.cast(r, DType::F64, d))
    }

    // ---- small helpers (all f64 or i64, shaped like their first operand) ----

    fn k(&self, like: V<'ctx>, v: f64) -> V<'ctx> {
        self.c_like(like, self.konst(Scalar::F(v), DType::F64))
    }

    fn ki(&self, like: V<'ctx>, v: i64) -> V<'ctx> {
        self.c_like(like, self.konst(Scalar::I(v), DType::I64))
    }

    fn add(&self, a: V<'ctx>, b: V<'ctx>) -> V<'ctx> {
        self.bin(Op::FAdd, a, b)
    }

    fn sub(&self, a: V<'ctx>, b: V<'ctx>) -> V<'ctx> {
        self.bin(Op::FSub, a, b)
    }

    fn mul(&self, a: V<'ctx>, b: V<'ctx>) -> V<'ctx> {
        self.bin(Op::FMul, a, b)
    }

    fn div(&self, a: V<'ctx>, b: V<'ctx>) -> V<'ctx> {
        self.bin(Op::FDiv, a, b)
    }

    fn addk(&self, a: V<'ctx>, v: f64) -> V<'ctx> {
        self.add(a, self.k(a, v))
    }

    fn mulk(&self, a: V<'ctx>, v: f64) -> V<'ctx> {
        self.mul(a, self.k(a, v))
    }

    fn cmpk(&self, p: P, a: V<'ctx>, v: f64) -> V<'ctx> {
        self.fcmp(p, a, self.k(a, v))
    }

    fn unary_intrinsic(&self, name: &str, x: V<'ctx>) -> V<'ctx> {
        self.intrinsic(name, &[x.get_type()], &[x])
    }

    fn fabs(&self, x: V<'ctx>) -> V<'ctx> {
        self.unary_intrinsic("llvm.fabs", x)
    }

    /// `|mag|` with the sign of `sign`.
    fn copysign(&self, mag: V<'ctx>, sign: V<'ctx>) -> V<'ctx> {
        self.intrinsic("llvm.copysign", &[mag.get_type()], &[mag, sign])
    }

    fn neg(&self, x: V<'ctx>) -> V<'ctx> {
        self.sub(self.k(x, -0.0), x)
    }

    /// `x` with NaN replaced by 0, so that a following float→int conversion is not poison.
    fn nan_to_zero(&self, x: V<'ctx>) -> V<'ctx> {
        self.select(self.fcmp(P::UNO, x, x), self.k(x, 0.0), x)
    }

    /// Clamps `x` into `[lo, hi]` (NaN stays NaN).
    fn clamp(&self, x: V<'ctx>, lo: f64, hi: f64) -> V<'ctx> {
        let x = self.select(self.cmpk(P::OGT, x, hi), self.k(x, hi), x);
        self.select(self.cmpk(P::OLT, x, lo), self.k(x, lo), x)
    }

    fn i64_like(&self) -> BasicTypeEnum<'ctx> {
        self.cx.i64_type().into()
    }

    fn to_bits(&self, x: V<'ctx>) -> V<'ctx> {
        self.cast_to(Op::BitCast, x, self.i64_like())
    }

    fn float_of_bits(&self, i: V<'ctx>) -> V<'ctx> {
        self.cast_to(Op::BitCast, i, self.cx.f64_type().into())
    }

    /// `2^n` for integral f64 `n` in [-1022, 1023] (built from the exponent bits).
    fn pow2(&self, n: V<'ctx>) -> V<'ctx> {
        let ni = self.cast_to(Op::FPToSI, n, self.i64_like());
        self.pow2i(ni)
    }

    fn pow2i(&self, ni: V<'ctx>) -> V<'ctx> {
        let e = self.bin(Op::Add, ni, self.ki(ni, 1023));
        self.float_of_bits(self.bin(Op::Shl, e, self.ki(ni, 52)))
    }

    /// Horner's rule: `c[0]·x^(n-1) + … + c[n-1]`.
    fn horner(&self, x: V<'ctx>, c: &[f64]) -> V<'ctx> {
        let mut y = self.k(x, c[0]);
        for &k in &c[1..] {
            y = self.addk(self.mul(y, x), k);
        }
        y
    }

    // ---- exp, expm1, tanh ----

    /// `exp` of f32 (scalar or vector): Cephes `expf`, with the power of two applied in two
    /// halves so results down to the subnormal range and up to `FLT_MAX` are right.
    pub fn exp_f32(&self, x: V<'ctx>) -> V<'ctx> {
        let c = |v: f64| self.c_like(x, self.konst(Scalar::F(v), DType::F32));
        let ci = |v: i64| self.c_like(x, self.konst(Scalar::I(v), DType::I32));
        let hi = self.fcmp(P::OGT, x, c(88.8));
        let xc = self.select(hi, c(88.8), x);
        let lo = self.fcmp(P::OLT, xc, c(-104.0));
        let xc = self.select(lo, c(-104.0), xc);
        let t = self.bin(Op::FMul, xc, c(std::f64::consts::LOG2_E));
        let fx = self.intrinsic("llvm.rint", &[t.get_type()], &[t]);
        let r = self.bin(Op::FSub, xc, self.bin(Op::FMul, fx, c(0.693_359_375)));
        let r = self.bin(Op::FSub, r, self.bin(Op::FMul, fx, c(-2.121_944_4e-4)));
        let coeffs = [
            1.987_569_15e-4,
            1.398_199_950_7e-3,
            8.333_451_907_3e-3,
            4.166_579_589_4e-2,
            1.666_666_545_9e-1,
            5.000_000_120_1e-1,
        ];
        let mut y = c(coeffs[0]);
        for &k in &coeffs[1..] {
            y = self.bin(Op::FAdd, self.bin(Op::FMul, y, r), c(k));
        }
        let z = self.bin(Op::FMul, r, r);
        let y = self.bin(
            Op::FAdd,
            self.bin(Op::FAdd, self.bin(Op::FMul, y, z), r),
            c(1.0),
        );
        let n = self.cast_to(Op::FPToSI, fx, self.cx.i32_type().into());
        let n1 = self.bin(Op::AShr, n, ci(1));
        let n2 = self.bin(Op::Sub, n, n1);
        let pow2 = |k: V<'ctx>| {
            let e = self.bin(Op::Shl, self.bin(Op::Add, k, ci(127)), ci(23));
            self.cast_to(Op::BitCast, e, self.cx.f32_type().into())
        };
        let res = self.bin(Op::FMul, self.bin(Op::FMul, y, pow2(n1)), pow2(n2));
        let nan = self.fcmp(P::UNO, x, x);
        self.select(nan, x, res)
    }

    /// `x = n·ln2 + r` with |r| ≤ ln2/2 and `p = e^r − 1` (Taylor to r^13: < 2^-60 relative).
    fn exp_reduce(&self, x: V<'ctx>) -> (V<'ctx>, V<'ctx>) {
        let n = self.unary_intrinsic("llvm.rint", self.mulk(x, LOG2_E));
        let r = self.sub(self.sub(x, self.mulk(n, LN2_HI)), self.mulk(n, LN2_LO));
        let q = self.horner(r, &inv_factorials(2, 13, 1, false));
        let p = self.add(r, self.mul(self.mul(r, r), q));
        (n, p)
    }

    /// `e^x`: the power of two is applied in two halves so that results down into the
    /// subnormals and up to `f64::MAX` are right.
    pub fn exp64(&self, x: V<'ctx>) -> V<'ctx> {
        let xc = self.nan_to_zero(self.clamp(x, -746.0, 710.0));
        let (n, p) = self.exp_reduce(xc);
        let res = self.scale2(self.addk(p, 1.0), n);
        self.select(self.fcmp(P::UNO, x, x), x, res)
    }

    /// `y·2^n` for integral f64 `n` in [-2044, 2046], the power applied in two halves so that
    /// results overflow to inf and round into the subnormals as they should.
    fn scale2(&self, y: V<'ctx>, n: V<'ctx>) -> V<'ctx> {
        let ni = self.cast_to(Op::FPToSI, n, self.i64_like());
        let n1 = self.bin(Op::AShr, ni, self.ki(ni, 1));
        let n2 = self.bin(Op::Sub, ni, n1);
        self.mul(self.mul(y, self.pow2i(n1)), self.pow2i(n2))
    }

    /// `tanh` of f32 in f32 (GELU's hot function): Cephes `tanhf`, an odd polynomial below
    /// |x| = 0.625 and `1 − 2/(e^(2|x|) + 1)` above, with the sign of x.
    pub fn tanh_f32(&self, x: V<'ctx>) -> V<'ctx> {
        let c = |v: f64| self.c_like(x, self.konst(Scalar::F(v), DType::F32));
        let a = self.fabs(x);
        let e = self.exp_f32(self.bin(Op::FMul, a, c(2.0)));
        let big = self.bin(
            Op::FSub,
            c(1.0),
            self.bin(Op::FDiv, c(2.0), self.bin(Op::FAdd, e, c(1.0))),
        );
        let z = self.bin(Op::FMul, x, x);
        let mut p = c(-5.704_988_727_45e-3);
        for k in [
            2.063_908_879_54e-2,
            -5.373_971_555_31e-2,
            1.333_144_220_36e-1,
            -3.333_328_194_22e-1,
        ] {
            p = self.bin(Op::FAdd, self.bin(Op::FMul, p, z), c(k));
        }
        let small = self.bin(Op::FAdd, self.bin(Op::FMul, self.bin(Op::FMul, p, z), x), x);
        let is_big = self.fcmp(P::OGT, a, c(0.625));
        // The sign is copied, not computed: the polynomial gives +0 for −0.
        let res = self.copysign(self.select(is_big, big, small), x);
        self.select(self.fcmp(P::UNO, x, x), x, res)
    }

    /// `e^x − 1` for x in [-80, 40] (no NaN): `2^n·p + (2^n − 1)`, exact but for the last add.
    fn expm1_64(&self, x: V<'ctx>) -> V<'ctx> {
        let (n, p) = self.exp_reduce(x);
        let t = self.pow2(n);
        self.add(self.mul(t, p), self.addk(t, -1.0))
    }

    /// `tanh x = −u / (2 + u)` with `u = e^(−2|x|) − 1`, with the sign of x.
    pub fn tanh64(&self, x: V<'ctx>) -> V<'ctx> {
        let a = self.nan_to_zero(self.clamp(self.fabs(x), 0.0, 40.0));
        let u = self.expm1_64(self.mulk(a, -2.0));
        let t = self.div(self.neg(u), self.addk(u, 2.0));
        let res = self.copysign(t, x);
        self.select(self.fcmp(P::UNO, x, x), x, res)
    }

    // ---- log ----

    /// `ln x`: `x = 2^e·m` with m in [√½, √2), `ln m = 2·atanh(f / (2 + f))`, f = m − 1
    /// (fdlibm's arrangement, Taylor coefficients).
    pub fn log64(&self, x: V<'ctx>) -> V<'ctx> {
        let tiny = self.cmpk(P::OLT, x, f64::MIN_POSITIVE);
        let xs = self.select(tiny, self.mulk(x, 2f64.powi(54)), x);
        let eadj = self.select(tiny, self.k(x, -54.0), self.k(x, 0.0));
        let bits = self.to_bits(xs);
        let biased = self.bin(Op::LShr, bits, self.ki(bits, 52));
        let biased = self.bin(Op::And, biased, self.ki(bits, 0x7ff));
        let e = self.bin(Op::Sub, biased, self.ki(bits, 1023));
        let e = self.cast_to(Op::SIToFP, e, self.cx.f64_type().into());
        let mant = self.bin(Op::And, bits, self.ki(bits, 0x000f_ffff_ffff_ffff));
        let m = self.float_of_bits(self.bin(Op::Or, mant, self.ki(bits, 0x3ff0_0000_0000_0000)));
        let big = self.cmpk(P::OGT, m, SQRT_2);
        let m = self.select(big, self.mulk(m, 0.5), m);
        let e = self.add(
            self.add(e, eadj),
            self.select(big, self.k(m, 1.0), self.k(m, 0.0)),
        );
        let f = self.addk(m, -1.0);
        let s = self.div(f, self.addk(f, 2.0));
        let z = self.mul(s, s);
        let odd: Vec<f64> = (1..=10).rev().map(|k| 2.0 / (2 * k + 1) as f64).collect();
        let r = self.mul(z, self.horner(z, &odd));
        let hfsq = self.mul(self.mulk(f, 0.5), f);
        // e·ln2_hi − ((hfsq − (s·(hfsq + R) + e·ln2_lo)) − f)
        let inner = self.add(self.mul(s, self.add(hfsq, r)), self.mulk(e, LN2_LO));
        let res = self.sub(self.mulk(e, LN2_HI), self.sub(self.sub(hfsq, inner), f));
        let res = self.select(self.cmpk(P::OEQ, x, f64::INFINITY), x, res);
        let res = self.select(self.cmpk(P::OEQ, x, 0.0), self.k(x, f64::NEG_INFINITY), res);
        self.select(self.cmpk(P::ULT, x, 0.0), self.k(x, f64::NAN), res)
    }

    // ---- sin, cos ----

    /// `sin x` or `cos x`: `x = n·π/2 + r` (Cody–Waite, three parts), Taylor polynomials on
    /// |r| ≤ π/4, the quadrant picks and signs; |x| > 2^18, inf and NaN go to libm.
    pub fn sincos64(&self, x: V<'ctx>, cos: bool) -> V<'ctx> {
        let slow = self.cmpk(P::UGT, self.fabs(x), TRIG_FAST_MAX);
        let xr = self.select(slow, self.k(x, 0.0), x);
        let n = self.unary_intrinsic("llvm.rint", self.mulk(xr, FRAC_2_PI));
        let r = self.sub(xr, self.mulk(n, PIO2[0]));
        let r = self.sub(r, self.mulk(n, PIO2[1]));
        let r = self.sub(r, self.mulk(n, PIO2[2]));
        let z = self.mul(r, r);
        let sc: Vec<f64> = inv_factorials(3, 17, 2, true).iter().map(|c| -c).collect();
        let sp = self.horner(z, &sc);
        let s = self.add(r, self.mul(self.mul(r, z), sp));
        // cos r = w + ((1 − w) − z/2 + z²·C(z)), w = 1 − z/2: recovers the rounding of w.
        let cp = self.horner(z, &inv_factorials(4, 18, 2, true));
        let hz = self.mulk(z, 0.5);
        let w = self.sub(self.k(z, 1.0), hz);
        let tail = self.add(
            self.sub(self.sub(self.k(z, 1.0), w), hz),
            self.mul(self.mul(z, z), cp),
        );
        let c = self.add(w, tail);
        let q = self.cast_to(Op::FPToSI, n, self.i64_like());
        let q = self.bin(Op::Add, q, self.ki(q, i64::from(cos)));
        let odd = self.icmp(
            IntPredicate::NE,
            self.bin(Op::And, q, self.ki(q, 1)),
            self.ki(q, 0),
        );
        let negate = self.icmp(
            IntPredicate::NE,
            self.bin(Op::And, q, self.ki(q, 2)),
            self.ki(q, 0),
        );
        let res = self.select(odd, c, s);
        let res = self.select(negate, self.neg(res), res);
        let res = if cos {
            res
        } else {
            // sin of ±0 and subnormals is x itself (the reduction would lose −0).
            self.select(self.cmpk(P::OLT, self.fabs(x), 2f64.powi(-27)), x, res)
        };
        self.libm_where(if cos { "cos" } else { "sin" }, x, res, slow)
    }

    /// `fast`, except in lanes where `mask` holds: there libm's `name(x)`, computed in a cold
    /// block entered only when some lane needs it.
    fn libm_where(&self, name: &str, x: V<'ctx>, fast: V<'ctx>, mask: V<'ctx>) -> V<'ctx> {
        let any = match mask {
            BasicValueEnum::VectorValue(_) => {
                self.intrinsic("llvm.vector.reduce.or", &[mask.get_type()], &[mask])
            }
            m => m,
        };
        let here = self.b.get_insert_block().expect("positioned");
        let func = here.get_parent().expect("in a function");
        let cold = self.cx.append_basic_block(func, "math.libm");
        let join = self.cx.append_basic_block(func, "math.join");
        self.b
            .build_conditional_branch(any.into_int_value(), cold, join)
            .expect("positioned");
        self.b.position_at_end(cold);
        let slow = self.libm(name, x);
        let blended = self.select(mask, slow, fast);
        let cold_end = self.b.get_insert_block().expect("positioned");
        self.b.build_unconditional_branch(join).expect("positioned");
        self.b.position_at_end(join);
        let phi = self.b.build_phi(fast.get_type(), "").expect("positioned");
        phi.add_incoming(&[(&fast, here), (&blended, cold_end)]);
        phi.as_basic_value()
    }

    /// `double name(double)` from libm, applied lane by lane to vectors.
    fn libm(&self, name: &str, v: V<'ctx>) -> V<'ctx> {
        let f64t = self.cx.f64_type();
        let f = self.m.get_function(name).unwrap_or_else(|| {
            self.m
                .add_function(name, f64t.fn_type(&[f64t.into()], false), None)
        });
        match v {
            BasicValueEnum::VectorValue(x) => {
                let mut out = x.get_type().get_undef();
                for l in 0..x.get_type().get_size() {
                    let idx = self.i32c(l as i64);
                    let e = self
                        .b
                        .build_extract_element(x, idx, "")
                        .expect("positioned");
                    let r = self.call(f, &[e]);
                    out = self
                        .b
                        .build_insert_element(out, r, idx, "")
                        .expect("positioned");
                }
                out.into()
            }
            x => self.call(f, &[x]),
        }
    }

    // ---- atan, asin, acos ----

    /// `atan x`: |x| > 1 uses π/2 − atan(1/|x|), |x| > tan(π/12) uses
    /// π/6 + atan((√3·t − 1)/(t + √3)), then Taylor on |t| ≤ tan(π/12).
    pub fn atan64(&self, x: V<'ctx>) -> V<'ctx> {
        let a = self.fabs(x);
        let inv = self.cmpk(P::OGT, a, 1.0);
        let a = self.select(inv, self.div(self.k(a, 1.0), a), a);
        let big = self.cmpk(P::OGT, a, TAN_PI_12);
        let shifted = self.div(self.addk(self.mulk(a, SQRT_3), -1.0), self.addk(a, SQRT_3));
        let t = self.select(big, shifted, a);
        let off = self.select(big, self.k(a, FRAC_PI_6), self.k(a, 0.0));
        let z = self.mul(t, t);
        let c: Vec<f64> = (1..=13)
            .rev()
            .map(|k| if k % 2 == 1 { -1.0 } else { 1.0 } / (2 * k + 1) as f64)
            .collect();
        let p = self.add(t, self.mul(self.mul(t, z), self.horner(z, &c)));
        let r = self.add(off, p);
        let flipped = self.addk(self.sub(self.k(r, PIO2_HI), r), PIO2_LO);
        let r = self.select(inv, flipped, r);
        self.copysign(r, x)
    }

    /// `asin x = 2·atan(x / (1 + √((1 − x)(1 + x))))` (|x| < 2^-26: x).
    pub fn asin64(&self, x: V<'ctx>) -> V<'ctx> {
        let one = self.k(x, 1.0);
        let d = self.unary_intrinsic("llvm.sqrt", self.mul(self.sub(one, x), self.add(one, x)));
        let r = self.mulk(self.atan64(self.div(x, self.add(one, d))), 2.0);
        self.select(self.cmpk(P::OLT, self.fabs(x), 2f64.powi(-26)), x, r)
    }

    /// `acos x = 2·atan(√((1 − x)/(1 + x)))`.
    pub fn acos64(&self, x: V<'ctx>) -> V<'ctx> {
        let one = self.k(x, 1.0);
        let q = self.div(self.sub(one, x), self.add(one, x));
        self.mulk(self.atan64(self.unary_intrinsic("llvm.sqrt", q)), 2.0)
    }

    // ---- erf ----

    /// `erf` of f32 in f32 (GELU's hot function), within 1.2 ulp: `x + x·P(x²)` below
    /// |x| = 0.921875, `1 − e^(Q(|x|))` (`Q ≈ ln erfc`, f32 `exp`) above, with the sign of x.
    /// Both are evaluated for every lane and selected, so a loop over it vectorises.
    pub fn erf_f32(&self, x: V<'ctx>) -> V<'ctx> {
        let c = |v: f64| self.c_like(x, self.konst(Scalar::F(v), DType::F32));
        let horner = |t: V<'ctx>, coeffs: &[f64]| {
            let mut y = c(coeffs[0]);
            for &k in &coeffs[1..] {
                y = self.bin(Op::FAdd, self.bin(Op::FMul, y, t), c(k));
            }
            y
        };
        let a = self.fabs(x);
        let s = self.bin(Op::FMul, x, x);
        let small = self.bin(Op::FAdd, x, self.bin(Op::FMul, x, horner(s, &ERF32_SMALL)));
        // NaN stays NaN through the clamp, the polynomial and `exp_f32`.
        let t = self.select(self.fcmp(P::OGT, a, c(ERF32_ONE)), c(ERF32_ONE), a);
        let e = self.exp_f32(horner(t, &ERF32_LARGE));
        let big = self.copysign(self.bin(Op::FSub, c(1.0), e), x);
        self.select(self.fcmp(P::OLT, a, c(ERF32_SPLIT)), small, big)
    }

    /// `e^(−a²)` without the rounding of `a²`: a = hi + lo (Veltkamp), hi² is exact and
    /// `e^(−(2·hi·lo + lo²))` is `1 − d + d²/2`.
    fn exp_neg_square(&self, a: V<'ctx>) -> V<'ctx> {
        let c = self.mulk(a, 134_217_729.0);
        let hi = self.sub(c, self.sub(c, a));
        let lo = self.sub(a, hi);
        let d = self.add(self.mul(self.mulk(hi, 2.0), lo), self.mul(lo, lo));
        let corr = self.add(self.sub(self.k(d, 1.0), d), self.mul(self.mulk(d, 0.5), d));
        self.mul(self.exp64(self.neg(self.mul(hi, hi))), corr)
    }

    /// `erf x`: Taylor below 1.5; above, `1 − erfc` with `erfc a = e^(−a²)/√π / F(a)`,
    /// F the continued fraction `a + (1/2)/(a + 1/(a + (3/2)/(a + …)))` evaluated forwards
    /// (all terms positive, one division).
    pub fn erf64(&self, x: V<'ctx>) -> V<'ctx> {
        let a = self.fabs(x);
        let two_over_sqrt_pi = std::f64::consts::FRAC_2_SQRT_PI;
        let mut fact = 1.0f64;
        let mut c = Vec::new();
        for n in 0..ERF_TAYLOR_TERMS {
            if n > 0 {
                fact *= n as f64;
            }
            let sign = if n % 2 == 1 { -1.0 } else { 1.0 };
            c.push(sign * two_over_sqrt_pi / (fact * (2 * n + 1) as f64));
        }
        c.reverse();
        let taylor = self.mul(a, self.horner(self.mul(a, a), &c));
        let ac = self.clamp(a, ERF_SPLIT, 6.0);
        let (mut a0, mut a1, mut b0, mut b1) = (self.k(a, 1.0), ac, self.k(a, 0.0), self.k(a, 1.0));
        for k in 1..=ERFC_CF_TERMS {
            let h = k as f64 * 0.5;
            let a2 = self.add(self.mul(ac, a1), self.mulk(a0, h));
            let b2 = self.add(self.mul(ac, b1), self.mulk(b0, h));
            (a0, a1, b0, b1) = (a1, a2, b1, b2);
        }
        let frac = self.div(b1, a1);
        let erfc = self.mul(
            self.mulk(self.exp_neg_square(ac), 0.5 * two_over_sqrt_pi),
            frac,
        );
        let tail = self.sub(self.k(a, 1.0), erfc);
        let r = self.select(self.cmpk(P::OLT, a, ERF_SPLIT), taylor, tail);
        self.copysign(r, x)
    }

    // ---- pow ----

    /// `x^y = e^(y·ln|x|)` with C99/IEEE special cases: `x^0 = 1^y = 1`, `(−1)^±inf = 1`,
    /// negative finite x with a non-integer y is NaN, odd integer y keeps the sign of x.
    /// Error: about `|y·ln x|·2^-53` relative on top of exp's ulp (f64 results near the ends
    /// of the range: up to ~700 ulps; f32, computed in f64: ≤ 0.5 ulp + double rounding).
    pub fn pow64(&self, x: V<'ctx>, y: V<'ctx>) -> V<'ctx> {
        let r = self.exp64(self.mul(y, self.log64(self.fabs(x))));
        let fl = |v: V<'ctx>| self.unary_intrinsic("llvm.floor", v);
        let yint = self.fcmp(P::OEQ, fl(y), y);
        let r = self.pow_of_two_base(x, y, yint, r);
        let half = self.mulk(y, 0.5);
        let yodd = self.bin(Op::And, yint, self.fcmp(P::ONE, fl(half), half));
        let xbits = self.to_bits(x);
        let xneg = self.icmp(IntPredicate::SLT, xbits, self.ki(xbits, 0));
        let r = self.select(self.bin(Op::And, xneg, yodd), self.neg(r), r);
        let neg_finite = self.bin(
            Op::And,
            self.cmpk(P::OLT, x, 0.0),
            self.cmpk(P::ONE, x, f64::NEG_INFINITY),
        );
        let not_int = self.bin(
            Op::Xor,
            yint,
            self.c_like(yint, self.konst(Scalar::B(true), DType::Bool)),
        );
        let r = self.select(
            self.bin(Op::And, neg_finite, not_int),
            self.k(x, f64::NAN),
            r,
        );
        let minus_one_inf = self.bin(
            Op::And,
            self.cmpk(P::OEQ, x, -1.0),
            self.cmpk(P::OEQ, self.fabs(y), f64::INFINITY),
        );
        let one = self.bin(Op::Or, self.cmpk(P::OEQ, x, 1.0), minus_one_inf);
        let one = self.bin(Op::Or, one, self.cmpk(P::OEQ, y, 0.0));
        let r = self.select(one, self.k(x, 1.0), r);
        // libm: a signaling NaN in either argument gives NaN, even for `1^y` and `x^0`.
        let snan = self.bin(Op::Or, self.is_snan(x), self.is_snan(y));
        self.select(snan, self.k(x, f64::NAN), r)
    }

    /// `|x|^y` exactly when `|x|` is a normal power of two `2^e` and `y` an integer: `2^(e·y)`,
    /// built in two halves so that `2^1024` and beyond is `inf` and the subnormals round
    /// correctly (`exp(y·ln x)` loses the last bits there: `pow(2, 1024)` gave `f64::MAX`).
    /// Otherwise `r`.
    fn pow_of_two_base(&self, x: V<'ctx>, y: V<'ctx>, yint: V<'ctx>, r: V<'ctx>) -> V<'ctx> {
        let bits = self.to_bits(x);
        let mant = self.bin(Op::And, bits, self.ki(bits, 0x000f_ffff_ffff_ffff));
        let biased = self.bin(
            Op::And,
            self.bin(Op::LShr, bits, self.ki(bits, 52)),
            self.ki(bits, 0x7ff),
        );
        let normal = self.bin(
            Op::And,
            self.icmp(IntPredicate::NE, biased, self.ki(bits, 0)),
            self.icmp(IntPredicate::NE, biased, self.ki(bits, 0x7ff)),
        );
        let exact = self.bin(
            Op::And,
            self.bin(Op::And, normal, yint),
            self.icmp(IntPredicate::EQ, mant, self.ki(bits, 0)),
        );
        let e = self.bin(Op::Sub, biased, self.ki(bits, 1023));
        let e = self.cast_to(Op::SIToFP, e, self.cx.f64_type().into());
        // e·y is exact or far outside [-1100, 1100]; the clamp keeps both halves in range.
        let n = self.nan_to_zero(self.clamp(self.mul(e, y), -1100.0, 1100.0));
        self.select(exact, self.scale2(self.k(x, 1.0), n), r)
    }

    fn is_snan(&self, x: V<'ctx>) -> V<'ctx> {
        let bits = self.to_bits(x);
        let top = self.bin(Op::And, bits, self.ki(bits, 0x7ff8_0000_0000_0000));
        let exp_all_ones = self.icmp(IntPredicate::EQ, top, self.ki(bits, 0x7ff0_0000_0000_0000));
        let mant = self.bin(Op::And, bits, self.ki(bits, 0x000f_ffff_ffff_ffff));
        let payload = self.icmp(IntPredicate::NE, mant, self.ki(bits, 0));
        self.bin(Op::And, exp_all_ones, payload)
    }
}
