//! Elements in memory against values in registers, and the 16-bit floats.
//!
//! `bool` is one byte in memory and `i1` in registers. `f16` and `bf16` are 16 bits in memory
//! (stored as `i16`) and `f32` in registers, rounded back to their dtype after every operation,
//! as the interpreter does:
//!
//! - f16 uses LLVM's `half`: `fpext` to widen and `fptrunc` to narrow (one F16C instruction
//!   each on x86-64 hosts that have it, as every AVX2 host does);
//! - bf16 is widened by shifting its bits into the high half of an `i32` bitcast to `f32`, and
//!   narrowed in integer arithmetic, rounding to nearest even (`bits + 0x7fff + lsb`), a NaN
//!   kept quiet (`0x0040` set) with its sign. LLVM 14 cannot select a `bfloat` load.
//!
//! An f64 value is narrowed to 16 bits through f32 rounded to odd, which rounds exactly once
//! (as `ir::instance::round_float` does).

use super::ops::{Gen, V};
use crate::ir::DType;
use inkwell::types::BasicTypeEnum;
use inkwell::values::InstructionOpcode as Op;
use inkwell::{FloatPredicate, IntPredicate};

impl<'ctx> Gen<'_, 'ctx> {
    /// A value loaded as `mty(d)` in its register type `sty(d)`.
    pub fn widen(&self, v: V<'ctx>, d: DType) -> V<'ctx> {
        match d {
            DType::Bool => {
                let z = self.c_like(v, self.cx.i8_type().const_zero().into());
                self.icmp(IntPredicate::NE, v, z)
            }
            DType::F16 => {
                let h = self.cast_to(Op::BitCast, v, self.cx.f16_type().into());
                self.cast_to(Op::FPExt, h, self.cx.f32_type().into())
            }
            DType::BF16 => {
                let w = self.cast_to(Op::ZExt, v, self.cx.i32_type().into());
                let hi = self.bin(Op::Shl, w, self.ic(w, 16));
                self.cast_to(Op::BitCast, hi, self.cx.f32_type().into())
            }
            _ => v,
        }
    }

    /// A register value of `d` as stored in memory (`mty(d)`).
    pub fn narrow(&self, v: V<'ctx>, d: DType) -> V<'ctx> {
        match d {
            DType::Bool => self.cast_to(Op::ZExt, v, self.cx.i8_type().into()),
            DType::F16 => {
                let h = self.cast_to(Op::FPTrunc, v, self.cx.f16_type().into());
                self.cast_to(Op::BitCast, h, self.cx.i16_type().into())
            }
            DType::BF16 => self.bf16_bits(v),
            _ => v,
        }
    }

    /// An f32 register value rounded to the 16-bit float `d` (kept in f32).
    pub fn round_half(&self, v: V<'ctx>, d: DType) -> V<'ctx> {
        if d.is_half() {
            self.widen(self.narrow(v, d), d)
        } else {
            v
        }
    }

    /// An f64 value rounded to `d`, a 16-bit float, in an f32 register.
    pub fn f64_to_half(&self, v: V<'ctx>, d: DType) -> V<'ctx> {
        self.round_half(self.f32_round_odd(v), d)
    }

    /// The bf16 bits (`i16`) nearest to an f32 value, ties to even; NaN stays a quiet NaN.
    fn bf16_bits(&self, v: V<'ctx>) -> V<'ctx> {
        let bits = self.cast_to(Op::BitCast, v, self.cx.i32_type().into());
        let hi = self.bin(Op::LShr, bits, self.ic(bits, 16));
        let lsb = self.bin(Op::And, hi, self.ic(bits, 1));
        let up = self.bin(Op::Add, bits, self.ic(bits, 0x7fff));
        let rounded = self.bin(Op::LShr, self.bin(Op::Add, up, lsb), self.ic(bits, 16));
        let quiet = self.bin(Op::Or, hi, self.ic(bits, 0x40));
        let nan = self.fcmp(FloatPredicate::UNO, v, v);
        let r = self.select(nan, quiet, rounded);
        self.cast_to(Op::Trunc, r, self.cx.i16_type().into())
    }

    /// An f64 value rounded to f32 toward zero, the last bit set when inexact ("round to odd").
    fn f32_round_odd(&self, v: V<'ctx>) -> V<'ctx> {
        let f32t: BasicTypeEnum = self.cx.f32_type().into();
        let r = self.cast_to(Op::FPTrunc, v, f32t);
        let back = self.cast_to(Op::FPExt, r, self.cx.f64_type().into());
        let exact = self.fcmp(FloatPredicate::UEQ, back, v);
        let bits = self.cast_to(Op::BitCast, r, self.cx.i32_type().into());
        let abs = |x: V<'ctx>| self.intrinsic("llvm.fabs", &[x.get_type()], &[x]);
        let away = self.fcmp(FloatPredicate::OGT, abs(back), abs(v));
        let down = self.bin(Op::Sub, bits, self.ic(bits, 1));
        let toward = self.select(away, down, bits);
        let odd = self.bin(Op::Or, toward, self.ic(bits, 1));
        let odd = self.cast_to(Op::BitCast, odd, f32t);
        self.select(exact, r, odd)
    }

    /// The i32 constant `c`, splat like `like`.
    fn ic(&self, like: V<'ctx>, c: u64) -> V<'ctx> {
        self.c_like(like, self.cx.i32_type().const_int(c, false).into())
    }
}
