//! Scalar semantics shared by every kernel evaluation: arithmetic per dtype, functions,
//! reduction identities and the coordinate-hash random generator.

use crate::ir::instance::{int_binop, Scalar};
use crate::ir::kernel::{BinOp, Func, Reduction, UnOp};
use crate::ir::DType;

/// Rounds a result to its dtype (f32 rounding, i32 wrapping).
pub fn fix(s: Scalar, d: DType) -> Scalar {
    match (s, d) {
        (Scalar::F(v), DType::F32) => Scalar::F(v as f32 as f64),
        (Scalar::I(v), DType::I32) => Scalar::I(v as i32 as i64),
        _ => s,
    }
}

pub fn binary(op: BinOp, a: Scalar, b: Scalar, d: DType) -> Scalar {
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
            (UnOp::Not, Scalar::B(b)) => Scalar::B(!b),
            _ => unreachable!("the verifier checked the operand type"),
        },
        d,
    )
}

/// max/min as numpy's `maximum`/`minimum` on x86-64: a NaN first operand is returned, else
/// `a` if it is strictly greater (less), else `b`; so ties (`-0.0` vs `0.0`) give the second
/// operand and a NaN second operand propagates.
fn extremum(a: Scalar, b: Scalar, max: bool) -> Scalar {
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
        (Scalar::I(x), Scalar::I(y)) if wins(Some(x.cmp(&y))) => a,
        (Scalar::F(_), Scalar::F(_)) | (Scalar::I(_), Scalar::I(_)) => b,
        _ => unreachable!("the verifier types both operands alike"),
    }
}

pub fn call(f: Func, args: &[Scalar], d: DType) -> Scalar {
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
            Scalar::I(v) => Scalar::I(v.wrapping_abs()),
            other => Scalar::F(other.as_f64().abs()),
        },
        Func::Max => extremum(x, args[1], true),
        Func::Min => extremum(x, args[1], false),
        Func::Select => {
            if x.as_bool() {
                args[1]
            } else {
                args[2]
            }
        }
        Func::Cast(to) => return x.cast(to),
    };
    fix(r, d)
}

pub fn identity(r: Reduction, d: DType) -> Scalar {
    let float = d.is_float();
    match r {
        Reduction::Sum => {
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
        Reduction::Max if float => Scalar::F(f64::NEG_INFINITY),
        Reduction::Min if float => Scalar::F(f64::INFINITY),
        Reduction::Max => Scalar::I(if d == DType::I32 {
            i32::MIN as i64
        } else {
            i64::MIN
        }),
        Reduction::Min => Scalar::I(if d == DType::I32 {
            i32::MAX as i64
        } else {
            i64::MAX
        }),
    }
}

pub fn combine(r: Reduction, acc: Scalar, x: Scalar, d: DType) -> Scalar {
    match r {
        Reduction::Sum => binary(BinOp::Add, acc, x, d),
        Reduction::Prod => binary(BinOp::Mul, acc, x, d),
        Reduction::Max => extremum(acc, x, true),
        Reduction::Min => extremum(acc, x, false),
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `rand`: a hash of the seed and the coordinates, so any shard recomputes the same values.
/// Floats are uniform in [0, 1); integers take the hash's bits; bools its lowest bit.
pub fn random(seed: u64, coord: &[i64], d: DType) -> Scalar {
    let h = coord
        .iter()
        .fold(splitmix(seed), |h, &c| splitmix(h ^ c as u64));
    match d {
        DType::F32 => Scalar::F(((h >> 40) as f32 * (1.0 / (1u64 << 24) as f32)) as f64),
        DType::F64 => Scalar::F((h >> 11) as f64 * (1.0 / (1u64 << 53) as f64)),
        DType::I32 => Scalar::I(h as i32 as i64),
        DType::I64 => Scalar::I(h as i64),
        DType::Bool => Scalar::B(h & 1 == 1),
    }
}
