//! TEG scalar semantics in LLVM IR, on scalars and on `<lanes x T>` vectors alike: the exact
//! counterpart of `interp/scalar.rs`.
//!
//! - f32 `+ - * /`, `sqrt`, `floor`, `ceil`, `abs` are single IEEE operations (what the
//!   interpreter's "compute in f64, round to f32" yields for them); `%` of f32 is computed in
//!   f64 and rounded, as the interpreter does, so they match bit for bit.
//! - `exp log tanh sin cos erf atan asin acos pow` are the vectorisable polynomials of
//!   `math.rs`, within a few ulps of the interpreter's libm (documented per function in
//!   `docs/teg.md`).
//! - Integers wrap; `/` is floor division and `%` its remainder, with `x / 0 == 0`,
//!   `x % 0 == 0` and `MIN / -1 == MIN` (no traps, also in masked-off vector lanes).
//! - `max`/`min` propagate NaN (numpy's `maximum`/`minimum`); casts saturate like Rust `as`.
//! - No fast-math flags anywhere: LLVM neither contracts nor reassociates on its own. The one
//!   documented reassociation is the vectorised reduction in `kernel/reduce.rs`; float `sum[k](a * b)`
//!   is a fused multiply-add (one rounding instead of two) unless `--fp-contract=off`.

use crate::ir::instance::Scalar;
use crate::ir::kernel::{BinOp, Func, Reduction, UnOp};
use crate::ir::DType;
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::Module;
use inkwell::types::{BasicTypeEnum, VectorType};
use inkwell::values::InstructionOpcode as Op;
use inkwell::values::{
    BasicMetadataValueEnum, BasicValueEnum, FunctionValue, IntValue, VectorValue,
};
use inkwell::{FloatPredicate, IntPredicate};

pub type V<'ctx> = BasicValueEnum<'ctx>;

/// An operation the backend has no lowering for (the verifier normally rejects it first).
pub type R<T> = Result<T, String>;

/// IR building context shared by every kernel of a module.
pub struct Gen<'a, 'ctx> {
    pub cx: &'ctx Context,
    pub m: &'a Module<'ctx>,
    pub b: &'a Builder<'ctx>,
    /// Vector lanes.
    pub w: u32,
    /// `--fp-contract=on`: fused multiply-add in float sums of products.
    pub contract: bool,
    /// The dot-product instructions kernels may use (none with `--dot-products=portable`).
    pub dot: super::target::Dot,
    /// `(k, j)`: the kernel being emitted writes its argument `k` in place of its argument `j`
    /// (the same memory, see `reuse`): neither is `noalias`, and the entry passes `j`'s pointer
    /// for both, so LLVM sees one pointer and keeps same-index loops vectorised.
    pub alias: Option<(usize, usize)>,
}

fn unsupported<T>(what: String) -> R<T> {
    Err(what)
}

impl<'ctx> Gen<'_, 'ctx> {
    // ---- types and constants ----

    /// The register type of a dtype (`bool` is `i1`, `f16` and `bf16` are `f32`; unsigned
    /// integers are the LLVM integers of their width).
    pub fn sty(&self, d: DType) -> BasicTypeEnum<'ctx> {
        match d {
            DType::F32 | DType::F16 | DType::BF16 => self.cx.f32_type().into(),
            DType::F64 => self.cx.f64_type().into(),
            DType::Bool => self.cx.bool_type().into(),
            d => match d.bits() {
                8 => self.cx.i8_type().into(),
                16 => self.cx.i16_type().into(),
                32 => self.cx.i32_type().into(),
                _ => self.cx.i64_type().into(),
            },
        }
    }

    /// The in-memory type of a dtype (`bool` is one byte, `f16` and `bf16` are `i16`; see
    /// `storage.rs`).
    pub fn mty(&self, d: DType) -> BasicTypeEnum<'ctx> {
        match d {
            DType::Bool => self.cx.i8_type().into(),
            DType::F16 | DType::BF16 => self.cx.i16_type().into(),
            d => self.sty(d),
        }
    }

    pub fn vec_of(&self, t: BasicTypeEnum<'ctx>, n: u32) -> VectorType<'ctx> {
        match t {
            BasicTypeEnum::FloatType(f) => f.vec_type(n),
            BasicTypeEnum::IntType(i) => i.vec_type(n),
            other => panic!("no vectors of {other:?}"),
        }
    }

    pub fn i64c(&self, v: i64) -> IntValue<'ctx> {
        self.cx.i64_type().const_int(v as u64, true)
    }

    pub fn i32c(&self, v: i64) -> IntValue<'ctx> {
        self.cx.i32_type().const_int(v as u64, true)
    }

    /// A scalar constant of `d` (`s` is converted like a cast).
    pub fn konst(&self, s: Scalar, d: DType) -> V<'ctx> {
        match (s.cast(d), self.sty(d)) {
            (Scalar::F(v), BasicTypeEnum::FloatType(t)) => t.const_float(v).into(),
            // `const_int` keeps the low bits of the width.
            (Scalar::I(v), BasicTypeEnum::IntType(t)) => t.const_int(v as u64, false).into(),
            (Scalar::B(b), _) => self.cx.bool_type().const_int(u64::from(b), false).into(),
            (s, t) => unreachable!("a {d} constant {s:?} of register type {t:?}"),
        }
    }

    /// `<0, 1, ..., w-1>` as i64.
    pub fn iota(&self) -> VectorValue<'ctx> {
        let vals: Vec<IntValue> = (0..self.w as i64).map(|i| self.i64c(i)).collect();
        VectorType::const_vector(&vals)
    }

    pub fn is_vec(v: V<'ctx>) -> bool {
        matches!(v, BasicValueEnum::VectorValue(_))
    }

    /// `v` broadcast to every lane (vectors are returned unchanged).
    pub fn splat(&self, v: V<'ctx>) -> V<'ctx> {
        if Self::is_vec(v) {
            return v;
        }
        let vt = self.vec_of(v.get_type(), self.w);
        let one = self
            .b
            .build_insert_element(vt.get_undef(), v, self.i32c(0), "")
            .expect("positioned");
        let zeros = self.cx.i32_type().vec_type(self.w).const_zero();
        self.b
            .build_shuffle_vector(one, vt.get_undef(), zeros, "")
            .expect("positioned")
            .into()
    }

    pub(super) fn both(&self, a: V<'ctx>, b: V<'ctx>) -> (V<'ctx>, V<'ctx>) {
        if Self::is_vec(a) || Self::is_vec(b) {
            (self.splat(a), self.splat(b))
        } else {
            (a, b)
        }
    }

    /// The same scalar type as `v`, vectorised like `v`.
    fn like(&self, v: V<'ctx>, scalar: BasicTypeEnum<'ctx>) -> BasicTypeEnum<'ctx> {
        match v {
            BasicValueEnum::VectorValue(x) => self.vec_of(scalar, x.get_type().get_size()).into(),
            _ => scalar,
        }
    }

    /// A constant like `v` (splat when `v` is a vector).
    pub(super) fn c_like(&self, v: V<'ctx>, c: V<'ctx>) -> V<'ctx> {
        match v {
            BasicValueEnum::VectorValue(x) => {
                let n = x.get_type().get_size();
                let vals = vec![c; n as usize];
                match c {
                    BasicValueEnum::FloatValue(_) => {
                        let f: Vec<_> = vals.iter().map(|v| v.into_float_value()).collect();
                        VectorType::const_vector(&f).into()
                    }
                    _ => {
                        let i: Vec<_> = vals.iter().map(|v| v.into_int_value()).collect();
                        VectorType::const_vector(&i).into()
                    }
                }
            }
            _ => c,
        }
    }

    fn f(&self, d: DType, v: f64) -> V<'ctx> {
        self.konst(Scalar::F(v), d)
    }

    // ---- raw instructions ----

    pub fn bin(&self, op: Op, a: V<'ctx>, b: V<'ctx>) -> V<'ctx> {
        let (a, b) = self.both(a, b);
        self.b.build_binop(op, a, b, "").expect("positioned")
    }

    pub fn cast_to(&self, op: Op, v: V<'ctx>, scalar: BasicTypeEnum<'ctx>) -> V<'ctx> {
        let t = self.like(v, scalar);
        self.b.build_cast(op, v, t, "").expect("positioned")
    }

    pub fn fcmp(&self, p: FloatPredicate, a: V<'ctx>, b: V<'ctx>) -> V<'ctx> {
        let (a, b) = self.both(a, b);
        match (a, b) {
            (BasicValueEnum::VectorValue(x), BasicValueEnum::VectorValue(y)) => self
                .b
                .build_float_compare(p, x, y, "")
                .expect("positioned")
                .into(),
            (x, y) => self
                .b
                .build_float_compare(p, x.into_float_value(), y.into_float_value(), "")
                .expect("positioned")
                .into(),
        }
    }

    pub fn icmp(&self, p: IntPredicate, a: V<'ctx>, b: V<'ctx>) -> V<'ctx> {
        let (a, b) = self.both(a, b);
        match (a, b) {
            (BasicValueEnum::VectorValue(x), BasicValueEnum::VectorValue(y)) => self
                .b
                .build_int_compare(p, x, y, "")
                .expect("positioned")
                .into(),
            (x, y) => self
                .b
                .build_int_compare(p, x.into_int_value(), y.into_int_value(), "")
                .expect("positioned")
                .into(),
        }
    }

    /// `c ? a : b`; a vector condition broadcasts scalar operands.
    pub fn select(&self, c: V<'ctx>, a: V<'ctx>, b: V<'ctx>) -> V<'ctx> {
        let (a, b) = if Self::is_vec(c) {
            (self.splat(a), self.splat(b))
        } else {
            self.both(a, b)
        };
        match c {
            BasicValueEnum::VectorValue(c) => self.b.build_select(c, a, b, "").expect("positioned"),
            c => self
                .b
                .build_select(c.into_int_value(), a, b, "")
                .expect("positioned"),
        }
    }

    /// `a * b + c` with one rounding (`--fp-contract=on`).
    pub fn mul_add(&self, a: V<'ctx>, b: V<'ctx>, c: V<'ctx>) -> V<'ctx> {
        let (a, b, c) = if Self::is_vec(a) || Self::is_vec(b) || Self::is_vec(c) {
            (self.splat(a), self.splat(b), self.splat(c))
        } else {
            (a, b, c)
        };
        self.intrinsic("llvm.fmuladd", &[a.get_type()], &[a, b, c])
    }

    /// Calls intrinsic `name` overloaded on `tys`.
    pub fn intrinsic(&self, name: &str, tys: &[BasicTypeEnum<'ctx>], args: &[V<'ctx>]) -> V<'ctx> {
        let f = Intrinsic::find(name)
            .and_then(|i| i.get_declaration(self.m, tys))
            .unwrap_or_else(|| panic!("LLVM 14 has intrinsic {name}"));
        self.call(f, args)
    }

    pub fn call(&self, f: FunctionValue<'ctx>, args: &[V<'ctx>]) -> V<'ctx> {
        let args: Vec<BasicMetadataValueEnum> = args.iter().map(|&a| a.into()).collect();
        self.b
            .build_call(f, &args, "")
            .expect("positioned")
            .try_as_basic_value()
            .basic()
            .expect("a value-returning call")
    }

    // ---- TEG operations ----

    /// Converts `v` of dtype `from` to `to` with the semantics of `Scalar::cast_from`.
    pub fn cast(&self, v: V<'ctx>, from: DType, to: DType) -> V<'ctx> {
        let t = self.sty(to);
        match (from, to) {
            _ if from == to => v,
            (_, DType::Bool) if from.is_float() => {
                let z = self.c_like(v, self.f(from, 0.0));
                self.fcmp(FloatPredicate::UNE, v, z)
            }
            (_, DType::Bool) => {
                let z = self.c_like(v, self.konst(Scalar::I(0), from));
                self.icmp(IntPredicate::NE, v, z)
            }
            (DType::Bool, _) if to.is_float() => self.cast_to(Op::UIToFP, v, t),
            (DType::Bool, _) => self.cast_to(Op::ZExt, v, t),
            _ if from.is_float() && to.is_float() => self.float_to_float(v, from, to),
            _ if from.is_float() => {
                let name = if to.is_unsigned() {
                    "llvm.fptoui.sat"
                } else {
                    "llvm.fptosi.sat"
                };
                self.intrinsic(name, &[self.like(v, t), v.get_type()], &[v])
            }
            _ if to.is_float() => self.int_to_float(v, from, to),
            _ => self.int_to_int(v, from, to),
        }
    }

    /// Between float dtypes; f16 and bf16 are f32 in registers, rounded to their dtype.
    fn float_to_float(&self, v: V<'ctx>, from: DType, to: DType) -> V<'ctx> {
        match (from, to) {
            (DType::F64, _) if to.is_half() => self.f64_to_half(v, to),
            (DType::F64, _) => self.cast_to(Op::FPTrunc, v, self.sty(to)),
            (_, DType::F64) => self.cast_to(Op::FPExt, v, self.sty(to)),
            _ => self.round_half(v, to),
        }
    }

    /// An integer to a float: through f64 (exact up to 32 bits; 64-bit values round once
    /// there, as `Scalar::as_f64` does), then rounded to `to`.
    fn int_to_float(&self, v: V<'ctx>, from: DType, to: DType) -> V<'ctx> {
        let op = if from.is_unsigned() {
            Op::UIToFP
        } else {
            Op::SIToFP
        };
        if to == DType::F32 && from.bits() <= 32 {
            return self.cast_to(op, v, self.sty(to));
        }
        let wide = self.cast_to(op, v, self.sty(DType::F64));
        self.float_to_float(wide, DType::F64, to)
    }

    /// Integers wrap to a narrower width and extend by the signedness of `from`.
    fn int_to_int(&self, v: V<'ctx>, from: DType, to: DType) -> V<'ctx> {
        let t = self.sty(to);
        match from.bits().cmp(&to.bits()) {
            std::cmp::Ordering::Equal => v,
            std::cmp::Ordering::Greater => self.cast_to(Op::Trunc, v, t),
            std::cmp::Ordering::Less if from.is_unsigned() => self.cast_to(Op::ZExt, v, t),
            std::cmp::Ordering::Less => self.cast_to(Op::SExt, v, t),
        }
    }

    pub fn binary(&self, op: BinOp, a: V<'ctx>, b: V<'ctx>, d: DType) -> R<V<'ctx>> {
        use BinOp::*;
        let order = |unsigned: bool| {
            self.int_compare(op, a, b, unsigned)
                .ok_or_else(|| format!("operator {op:?} on {d}"))
        };
        Ok(match (d, op) {
            (d, Add | Sub | Mul | Div) if d.is_half() => {
                let r = self.binary(op, a, b, DType::F32)?;
                self.round_half(r, d)
            }
            (d, _) if d.is_float() => match op {
                Add => self.bin(Op::FAdd, a, b),
                Sub => self.bin(Op::FSub, a, b),
                Mul => self.bin(Op::FMul, a, b),
                Div => self.bin(Op::FDiv, a, b),
                Rem => self.float_rem(a, b, d),
                Lt => self.fcmp(FloatPredicate::OLT, a, b),
                Le => self.fcmp(FloatPredicate::OLE, a, b),
                Gt => self.fcmp(FloatPredicate::OGT, a, b),
                Ge => self.fcmp(FloatPredicate::OGE, a, b),
                Eq => self.fcmp(FloatPredicate::OEQ, a, b),
                Ne => self.fcmp(FloatPredicate::UNE, a, b),
                _ => return unsupported(format!("operator {op:?} on {d}")),
            },
            (d, _) if d.is_int() => match op {
                Add => self.bin(Op::Add, a, b),
                Sub => self.bin(Op::Sub, a, b),
                Mul => self.bin(Op::Mul, a, b),
                BitAnd => self.bin(Op::And, a, b),
                BitOr => self.bin(Op::Or, a, b),
                BitXor => self.bin(Op::Xor, a, b),
                Shl | Shr => self.shift(op == Shl, a, b, d),
                Div if d.is_unsigned() => self.unsigned_div(a, b, d, Op::UDiv),
                Rem if d.is_unsigned() => self.unsigned_div(a, b, d, Op::URem),
                Div => self.floor_div(a, b, d, false),
                Rem => self.floor_div(a, b, d, true),
                _ => order(d.is_unsigned())?,
            },
            (_, _) => match op {
                And => self.bin(Op::And, a, b),
                Or => self.bin(Op::Or, a, b),
                _ => order(true)?,
            },
        })
    }

    /// `a << b` (`left`) or `a >> b` (arithmetic for signed dtypes) without poison: an amount
    /// outside `0..width` shifts every bit out (0, or -1 for `>>` of a negative signed value).
    fn shift(&self, left: bool, a: V<'ctx>, b: V<'ctx>, d: DType) -> V<'ctx> {
        let (a, b) = self.both(a, b);
        let c = |v: i64| self.c_like(a, self.konst(Scalar::I(v), d));
        let width = d.bits() as i64;
        let inside = self.icmp(IntPredicate::ULT, b, c(width));
        let safe = self.select(inside, b, c(0));
        let (op, out) = match (left, d.is_unsigned()) {
            (true, _) => (Op::Shl, c(0)),
            (false, true) => (Op::LShr, c(0)),
            (false, false) => (Op::AShr, self.bin(Op::AShr, a, c(width - 1))),
        };
        self.select(inside, self.bin(op, a, safe), out)
    }

    /// An integer (or bool) comparison in the signed or unsigned order; `None` for another
    /// operator.
    fn int_compare(&self, op: BinOp, a: V<'ctx>, b: V<'ctx>, unsigned: bool) -> Option<V<'ctx>> {
        use IntPredicate::*;
        let p = match (op, unsigned) {
            (BinOp::Lt, false) => SLT,
            (BinOp::Le, false) => SLE,
            (BinOp::Gt, false) => SGT,
            (BinOp::Ge, false) => SGE,
            (BinOp::Lt, true) => ULT,
            (BinOp::Le, true) => ULE,
            (BinOp::Gt, true) => UGT,
            (BinOp::Ge, true) => UGE,
            (BinOp::Eq, _) => EQ,
            (BinOp::Ne, _) => NE,
            _ => return None,
        };
        Some(self.icmp(p, a, b))
    }

    /// `x - y * floor(x / y)`, in f64 (then rounded) for f32, f16 and bf16 like the interpreter.
    fn float_rem(&self, a: V<'ctx>, b: V<'ctx>, d: DType) -> V<'ctx> {
        let (a, b) = self.both(a, b);
        let (x, y) = (self.cast(a, d, DType::F64), self.cast(b, d, DType::F64));
        let q = self.bin(Op::FDiv, x, y);
        let fl = self.intrinsic("llvm.floor", &[q.get_type()], &[q]);
        let t = self.bin(Op::FMul, y, fl);
        let r = self.bin(Op::FSub, x, t);
        self.cast(r, DType::F64, d)
    }

    /// Unsigned division (`op` is `udiv` or `urem`) without traps: `x / 0 == x % 0 == 0`.
    fn unsigned_div(&self, a: V<'ctx>, b: V<'ctx>, d: DType, op: Op) -> V<'ctx> {
        let (a, b) = self.both(a, b);
        let c = |v: i64| self.c_like(a, self.konst(Scalar::I(v), d));
        let zero = self.icmp(IntPredicate::EQ, b, c(0));
        let safe = self.select(zero, c(1), b);
        self.select(zero, c(0), self.bin(op, a, safe))
    }

    /// Floor division (or its remainder) without traps: `x / 0 == 0`, `x % 0 == 0`,
    /// `MIN / -1 == MIN` (wrapping), `x % -1 == 0`.
    fn floor_div(&self, a: V<'ctx>, b: V<'ctx>, d: DType, rem: bool) -> V<'ctx> {
        let (a, b) = self.both(a, b);
        let c = |v: i64| self.c_like(a, self.konst(Scalar::I(v), d));
        let zero = self.icmp(IntPredicate::EQ, b, c(0));
        let neg1 = self.icmp(IntPredicate::EQ, b, c(-1));
        let special = self.bin(Op::Or, zero, neg1);
        let safe = self.select(special, c(1), b);
        let r = self.bin(Op::SRem, a, safe);
        let r_nz = self.icmp(IntPredicate::NE, r, c(0));
        let x = self.bin(Op::Xor, r, b);
        let signs = self.icmp(IntPredicate::SLT, x, c(0));
        let adj = self.bin(Op::And, r_nz, signs);
        if rem {
            let fixed = self.select(adj, self.bin(Op::Add, r, b), r);
            self.select(special, c(0), fixed)
        } else {
            let q = self.bin(Op::SDiv, a, safe);
            let q = self.select(adj, self.bin(Op::Sub, q, c(1)), q);
            let negated = self.bin(Op::Sub, c(0), a);
            let q = self.select(neg1, negated, q);
            self.select(zero, c(0), q)
        }
    }

    pub fn unary(&self, op: UnOp, a: V<'ctx>, d: DType) -> R<V<'ctx>> {
        Ok(match (op, d) {
            (UnOp::Neg, d) if d.is_float() => match a {
                BasicValueEnum::FloatValue(x) => {
                    self.b.build_float_neg(x, "").expect("positioned").into()
                }
                BasicValueEnum::VectorValue(x) => {
                    self.b.build_float_neg(x, "").expect("positioned").into()
                }
                _ => return unsupported(format!("negation of {d}")),
            },
            (UnOp::Neg, d) if d.is_int() => {
                let z = self.c_like(a, self.konst(Scalar::I(0), d));
                self.bin(Op::Sub, z, a)
            }
            (UnOp::BitNot, d) if d.is_int() => {
                let ones = self.c_like(a, self.konst(Scalar::I(-1), d));
                self.bin(Op::Xor, a, ones)
            }
            (UnOp::Not, DType::Bool) => {
                let t = self.c_like(a, self.konst(Scalar::B(true), d));
                self.bin(Op::Xor, a, t)
            }
            _ => return unsupported(format!("unary {op:?} on {d}")),
        })
    }

    /// NaN-propagating maximum/minimum (integers: plain).
    pub fn extremum(&self, a: V<'ctx>, b: V<'ctx>, d: DType, max: bool) -> R<V<'ctx>> {
        let (a, b) = self.both(a, b);
        Ok(match d {
            d if d.is_float() => {
                let p = if max {
                    FloatPredicate::OGT
                } else {
                    FloatPredicate::OLT
                };
                let pick = self.select(self.fcmp(p, a, b), a, b);
                let nan = self.fcmp(FloatPredicate::UNO, a, a);
                self.select(nan, a, pick)
            }
            d if d.is_int() => {
                let p = match (max, d.is_unsigned()) {
                    (true, false) => IntPredicate::SGT,
                    (false, false) => IntPredicate::SLT,
                    (true, true) => IntPredicate::UGT,
                    (false, true) => IntPredicate::ULT,
                };
                self.select(self.icmp(p, a, b), a, b)
            }
            _ => return unsupported("max/min of bool".into()),
        })
    }

    /// A kernel function call; `ad` are the argument dtypes, `d` the result dtype.
    pub fn func(&self, f: Func, args: &[V<'ctx>], ad: &[DType], d: DType) -> R<V<'ctx>> {
        let x = args[0];
        let need_float = |name: &str| -> R<()> {
            if ad[0].is_float() {
                Ok(())
            } else {
                unsupported(format!("{name} of {}", ad[0]))
            }
        };
        Ok(match f {
            Func::Exp
            | Func::Log
            | Func::Tanh
            | Func::Sin
            | Func::Cos
            | Func::Erf
            | Func::Atan
            | Func::Asin
            | Func::Acos
            | Func::Pow => {
                need_float(f.name())?;
                self.math(f, args, ad[0]).expect("a math function")
            }
            Func::Sqrt | Func::Floor | Func::Ceil => {
                need_float(f.name())?;
                let name = format!("llvm.{}", f.name());
                let r = self.intrinsic(&name, &[x.get_type()], &[x]);
                self.round_half(r, ad[0])
            }
            Func::Abs if ad[0].is_float() => self.intrinsic("llvm.fabs", &[x.get_type()], &[x]),
            Func::Abs if ad[0].is_unsigned() => x,
            Func::Abs if ad[0].is_int() => {
                let z = self.c_like(x, self.konst(Scalar::I(0), ad[0]));
                let neg = self.icmp(IntPredicate::SLT, x, z);
                self.select(neg, self.bin(Op::Sub, z, x), x)
            }
            Func::Abs => return unsupported("abs of bool".into()),
            Func::Popcount if ad[0].is_int() => self.intrinsic("llvm.ctpop", &[x.get_type()], &[x]),
            Func::Popcount => return unsupported(format!("popcount of {}", ad[0])),
            Func::Max => self.extremum(x, args[1], ad[0], true)?,
            Func::Min => self.extremum(x, args[1], ad[0], false)?,
            Func::Select => {
                let c = self.cast(x, ad[0], DType::Bool);
                self.select(c, args[1], args[2])
            }
            Func::Cast(to) => {
                let _ = d;
                self.cast(x, ad[0], to)
            }
        })
    }

    /// The identity of a reduction.
    pub fn identity(&self, r: Reduction, d: DType) -> R<V<'ctx>> {
        let f = d.is_float();
        let s = match (r, d) {
            (_, DType::Bool) => return unsupported(format!("{} over bool", r.name())),
            // Their start: the identity of max / min (see `kernel/reduce.rs`).
            (Reduction::ArgMax, _) => return self.identity(Reduction::Max, d),
            (Reduction::ArgMin, _) => return self.identity(Reduction::Min, d),
            // A mean is lowered to a sum and a division; it steps as the sum.
            (Reduction::Sum | Reduction::Mean, _) if f => Scalar::F(0.0),
            (Reduction::Sum | Reduction::Mean, _) => Scalar::I(0),
            (Reduction::Prod, _) if f => Scalar::F(1.0),
            (Reduction::Prod, _) => Scalar::I(1),
            (Reduction::Max, _) if f => Scalar::F(f64::NEG_INFINITY),
            (Reduction::Min, _) if f => Scalar::F(f64::INFINITY),
            // The integer MIN / MAX of the dtype (`konst` keeps a u64 MAX's low 64 bits).
            (Reduction::Max, _) => Scalar::I(d.int_range().map_or(i64::MIN, |r| r.0 as i64)),
            (Reduction::Min, _) => Scalar::I(d.int_range().map_or(i64::MAX, |r| r.1 as i64)),
        };
        Ok(self.konst(s, d))
    }

    pub fn combine(&self, r: Reduction, acc: V<'ctx>, x: V<'ctx>, d: DType) -> R<V<'ctx>> {
        match r {
            Reduction::Sum | Reduction::Mean => self.binary(BinOp::Add, acc, x, d),
            Reduction::Prod => self.binary(BinOp::Mul, acc, x, d),
            Reduction::Max => self.extremum(acc, x, d, true),
            Reduction::Min => self.extremum(acc, x, d, false),
            Reduction::ArgMax | Reduction::ArgMin => {
                unsupported(format!("{} is not a combination of values", r.name()))
            }
        }
    }

    /// Whether `argmax` (`max`) or `argmin` moves from `best` to the later `x` of dtype `d`
    /// (`interp::scalar::arg_takes`): never from a NaN, always to a NaN, else to a strictly
    /// greater (less) value.
    pub fn arg_takes(&self, x: V<'ctx>, best: V<'ctx>, d: DType, max: bool) -> R<V<'ctx>> {
        let op = if max { BinOp::Gt } else { BinOp::Lt };
        let better = self.binary(op, x, best, d)?;
        if !d.is_float() {
            return Ok(better);
        }
        let (x, best) = self.both(x, best);
        let x_nan = self.fcmp(FloatPredicate::UNO, x, x);
        let best_ok = self.fcmp(FloatPredicate::ORD, best, best);
        Ok(self.bin(Op::And, best_ok, self.bin(Op::Or, x_nan, better)))
    }

    /// Combines the lanes of `v` pairwise (halves first) down to a scalar.
    pub fn hreduce(&self, r: Reduction, v: V<'ctx>, d: DType) -> R<V<'ctx>> {
        let mut v = v.into_vector_value();
        let mut n = v.get_type().get_size();
        while n > 1 {
            let h = n / 2;
            let lo: Vec<IntValue> = (0..h)
                .map(|i| self.cx.i32_type().const_int(i as u64, false))
                .collect();
            let hi: Vec<IntValue> = (h..n)
                .map(|i| self.cx.i32_type().const_int(i as u64, false))
                .collect();
            let a = self
                .b
                .build_shuffle_vector(v, v, VectorType::const_vector(&lo), "")
                .expect("positioned");
            let b = self
                .b
                .build_shuffle_vector(v, v, VectorType::const_vector(&hi), "")
                .expect("positioned");
            v = self.combine(r, a.into(), b.into(), d)?.into_vector_value();
            n = h;
        }
        Ok(self
            .b
            .build_extract_element(v, self.i32c(0), "")
            .expect("positioned"))
    }
}
