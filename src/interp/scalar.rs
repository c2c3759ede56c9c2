//! Scalar semantics shared by every kernel evaluation: arithmetic per dtype, functions,
//! reduction identities and the coordinate-hash random generator.

use crate::ir::instance::{int_binop, round_float, wrap_int, Scalar};
use crate::ir::kernel::{BinOp, Func, Reduction, UnOp};
use crate::ir::DType;

/// Rounds a result to its dtype (f32, f16 and bf16 rounding to nearest even, narrow integers
/// wrapping).
pub fn fix(s: Scalar, d: DType) -> Scalar {
    match s {
        Scalar::F(v) => Scalar::F(round_float(v, d)),
        Scalar::I(v) => Scalar::I(wrap_int(v, d)),
        Scalar::B(_) => s,
    }
}

/// `a op b` for operands of dtype `d` (an arithmetic result has that dtype too).
pub fn binary(op: BinOp, a: Scalar, b: Scalar, d: DType) -> Scalar {
    if let (true, Scalar::I(x), Scalar::I(y)) = (op.is_bitwise(), a, b) {
        return Scalar::I(wrap_int(bitwise(op, x, y, d), d));
    }
    if d.is_unsigned() {
        if let (Scalar::I(x), Scalar::I(y)) = (a, b) {
            return unsigned_binary(op, x as u64, y as u64, d);
        }
    }
    let r = match (a, b) {
        (Scalar::F(x), Scalar::F(y)) => match op {
            BinOp::Add => Scalar::F(x + y),
            BinOp::Sub => Scalar::F(x - y),
            BinOp::Mul => Scalar::F(x * y),
            BinOp::Div => Scalar::F(x / y),
            BinOp::Rem => Scalar::F(x - y * (x / y).floor()),
            _ => Scalar::B(compare(op, x.partial_cmp(&y))),
        },
        (Scalar::I(x), Scalar::I(y)) => match op {
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem => {
                Scalar::I(int_binop(op, x, y))
            }
            _ => Scalar::B(compare(op, Some(x.cmp(&y)))),
        },
        (Scalar::B(x), Scalar::B(y)) => Scalar::B(match op {
            BinOp::And => x && y,
            BinOp::Or => x || y,
            _ => compare(op, Some(x.cmp(&y))),
        }),
        _ => unreachable!("the verifier types both operands alike"),
    };
    fix(r, d)
}

/// Unsigned arithmetic on the bits of `x` and `y` (u8 to u32 values are non-negative, a u64
/// is held as its bits): wrapping, `x / 0 == 0`, `x % 0 == 0`, unsigned order.
fn unsigned_binary(op: BinOp, x: u64, y: u64, d: DType) -> Scalar {
    let r = match op {
        BinOp::Add => x.wrapping_add(y),
        BinOp::Sub => x.wrapping_sub(y),
        BinOp::Mul => x.wrapping_mul(y),
        BinOp::Div => x.checked_div(y).unwrap_or(0),
        BinOp::Rem => x.checked_rem(y).unwrap_or(0),
        _ => return Scalar::B(compare(op, Some(x.cmp(&y)))),
    };
    fix(Scalar::I(r as i64), d)
}

/// `& | ^ << >>` on integers of dtype `d` (held sign-extended, or zero-extended for unsigned
/// dtypes; a u64 as its bits). A shift amount outside `0..width` (negative, or at least the
/// width) shifts every bit out: `<<` gives 0, `>>` gives 0, or -1 for a negative signed value.
fn bitwise(op: BinOp, x: i64, y: i64, d: DType) -> i64 {
    let width = d.bits() as i64;
    let inside = (0..width).contains(&y);
    match op {
        BinOp::BitAnd => x & y,
        BinOp::BitOr => x | y,
        BinOp::BitXor => x ^ y,
        BinOp::Shl if inside => x << y,
        BinOp::Shr if inside && d.is_unsigned() => ((x as u64) >> y) as i64,
        BinOp::Shr if inside => x >> y,
        BinOp::Shr if d.is_signed_int() && x < 0 => -1,
        _ => 0,
    }
}

fn compare(op: BinOp, o: Option<std::cmp::Ordering>) -> bool {
    use std::cmp::Ordering::*;
    match (op, o) {
        (BinOp::Ne, None) => true,
        (_, None) => false,
        (BinOp::Lt, Some(o)) => o == Less,
        (BinOp::Le, Some(o)) => o != Greater,
        (BinOp::Gt, Some(o)) => o == Greater,
        (BinOp::Ge, Some(o)) => o != Less,
        (BinOp::Eq, Some(o)) => o == Equal,
        (BinOp::Ne, Some(o)) => o != Equal,
        _ => unreachable!("not a comparison"),
    }
}

pub fn unary(op: UnOp, a: Scalar, d: DType) -> Scalar {
    fix(
        match (op, a) {
            (UnOp::Neg, Scalar::F(x)) => Scalar::F(-x),
            (UnOp::Neg, Scalar::I(x)) => Scalar::I(x.wrapping_neg()),
            (UnOp::BitNot, Scalar::I(x)) => Scalar::I(!x),
            (UnOp::Not, Scalar::B(b)) => Scalar::B(!b),
            _ => unreachable!("the verifier checked the operand type"),
        },
        d,
    )
}

/// max/min as numpy's `maximum`/`minimum` on x86-64: a NaN first operand is returned, else
/// `a` if it is strictly greater (less), else `b`; so ties (`-0.0` vs `0.0`) give the second
/// operand and a NaN second operand propagates.
/// Integers of dtype `d` compare by value (a u64 by its unsigned value).
fn extremum(a: Scalar, b: Scalar, d: DType, max: bool) -> Scalar {
    let wins = |o: Option<std::cmp::Ordering>| {
        o == Some(if max {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Less
        })
    };
    match (a, b) {
        (Scalar::F(x), Scalar::F(_)) if x.is_nan() => a,
        (Scalar::F(x), Scalar::F(y)) if wins(x.partial_cmp(&y)) => a,
        (Scalar::I(x), Scalar::I(y))
            if d == DType::U64 && wins(Some((x as u64).cmp(&(y as u64)))) =>
        {
            a
        }
        (Scalar::I(x), Scalar::I(y)) if d != DType::U64 && wins(Some(x.cmp(&y))) => a,
        (Scalar::F(_), Scalar::F(_)) | (Scalar::I(_), Scalar::I(_)) => b,
        _ => unreachable!("the verifier types both operands alike"),
    }
}

/// `f(args)`: `a0` is the dtype of the first argument, `d` the result's.
pub fn call(f: Func, args: &[Scalar], a0: DType, d: DType) -> Scalar {
    let x = args[0];
    let float = |g: fn(f64) -> f64| Scalar::F(g(x.as_f64()));
    let r = match f {
        Func::Exp => float(f64::exp),
        Func::Log => float(f64::ln),
        Func::Sqrt => float(f64::sqrt),
        Func::Tanh => float(f64::tanh),
        Func::Sin => float(f64::sin),
        Func::Cos => float(f64::cos),
        Func::Erf => float(libm::erf),
        Func::Atan => float(f64::atan),
        Func::Asin => float(f64::asin),
        Func::Acos => float(f64::acos),
        Func::Pow => Scalar::F(x.as_f64().powf(args[1].as_f64())),
        Func::Floor => float(f64::floor),
        Func::Ceil => float(f64::ceil),
        Func::Abs => match x {
            Scalar::I(_) if a0.is_unsigned() => x,
            Scalar::I(v) => Scalar::I(v.wrapping_abs()),
            other => Scalar::F(other.as_f64().abs()),
        },
        Func::Max => extremum(x, args[1], a0, true),
        Func::Min => extremum(x, args[1], a0, false),
        Func::Popcount => {
            let bits = a0.bits();
            let mask = if bits >= 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
            Scalar::I(i64::from((x.as_i64() as u64 & mask).count_ones()))
        }
        Func::Select => {
            if x.as_bool() {
                args[1]
            } else {
                args[2]
            }
        }
        Func::Cast(to) => return x.cast_from(a0, to),
    };
    fix(r, d)
}

pub fn identity(r: Reduction, d: DType) -> Scalar {
    let float = d.is_float();
    match r {
        // A mean is lowered to a sum and a division; it starts and steps as the sum.
        Reduction::Sum | Reduction::Mean => {
            if float {
                Scalar::F(0.0)
            } else {
                Scalar::I(0)
            }
        }
        Reduction::Prod => {
            if float {
                Scalar::F(1.0)
            } else {
                Scalar::I(1)
            }
        }
        Reduction::Max | Reduction::ArgMax if float => Scalar::F(f64::NEG_INFINITY),
        Reduction::Min | Reduction::ArgMin if float => Scalar::F(f64::INFINITY),
        // The integer MIN / MAX of the dtype (u64's MAX as its bits).
        Reduction::Max | Reduction::ArgMax => {
            Scalar::I(d.int_range().map_or(i64::MIN, |r| r.0 as i64))
        }
        Reduction::Min | Reduction::ArgMin => {
            Scalar::I(d.int_range().map_or(i64::MAX, |r| r.1 as i64))
        }
    }
}

/// Whether `argmax` (`max`) or `argmin` moves from `best` to the later element `x` of dtype `d`:
/// never from a NaN, always to a NaN, else to a strictly greater (less) value; so ties keep the
/// first index and the first NaN wins, as in numpy.
pub fn arg_takes(x: Scalar, best: Scalar, d: DType, max: bool) -> bool {
    let nan = |s: Scalar| matches!(s, Scalar::F(v) if v.is_nan());
    let op = if max { BinOp::Gt } else { BinOp::Lt };
    !nan(best) && (nan(x) || binary(op, x, best, d).as_bool())
}

/// One step of a reduction (`argmax`/`argmin` step with [`arg_takes`]).
pub fn combine(r: Reduction, acc: Scalar, x: Scalar, d: DType) -> Scalar {
    match r {
        Reduction::Sum | Reduction::Mean => binary(BinOp::Add, acc, x, d),
        Reduction::Prod => binary(BinOp::Mul, acc, x, d),
        Reduction::Max => extremum(acc, x, d, true),
        Reduction::Min => extremum(acc, x, d, false),
        Reduction::ArgMax | Reduction::ArgMin => unreachable!("kernel.rs steps argmax/argmin"),
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `rand`: a hash of the seed and the coordinates, so any shard recomputes the same values.
/// Floats are uniform in [0, 1) (as many top bits of the hash as the dtype has significand
/// bits); integers take the hash's low bits; bools its lowest bit.
pub fn random(seed: u64, coord: &[i64], d: DType) -> Scalar {
    let h = coord
        .iter()
        .fold(splitmix(seed), |h, &c| splitmix(h ^ c as u64));
    match d {
        DType::F32 => Scalar::F(((h >> 40) as f32 * (1.0 / (1u64 << 24) as f32)) as f64),
        DType::F64 => Scalar::F((h >> 11) as f64 * (1.0 / (1u64 << 53) as f64)),
        DType::F16 => Scalar::F((h >> 53) as f64 * (1.0 / (1u64 << 11) as f64)),
        DType::BF16 => Scalar::F((h >> 56) as f64 * (1.0 / (1u64 << 8) as f64)),
        DType::Bool => Scalar::B(h & 1 == 1),
        d => Scalar::I(wrap_int(h as i64, d)),
    }
}
