//! Contractions on dot-product instructions: `c[i, j] = sum[k](f32(a[i, k]) * f32(b[k, j]))`
//! over bf16 inputs (f32 result, or the same cast to bf16) on AVX512_BF16's `vdpbf16ps`, and
//! `sum[k](i32(a[i, k]) * i32(b[k, j]))` over one u8 and one i8 input on AVX512_VNNI's
//! `vpdpbusd` (the non-saturating form: the i32 sum wraps, as the interpreter's does).
//!
//! Both instructions sum a *group* of adjacent reduction points (2 bf16 or 4 bytes) packed into
//! one 32-bit lane. For each panel of 64 columns the operand varying along `j` (`b[k, j]`) is
//! packed as `[k / group][j][group]`, the missing points of a last partial group as zeros;
//! the other operand's group for a row (`a[i, 2k'..2k'+2]`, contiguous along `k`) is loaded as
//! one 32-bit word and broadcast. Rows go 6 at a time (24 accumulators), then one by one; the
//! partial last panel is masked. The result is not the interpreter's sequential f32 sum for
//! bf16 (pairs, flushed subnormals: see docs/teg.md §12 for the tolerance promised); the
//! integer result is exact.
//!
//! Anything else (another shape of statement, a padded or temporary operand, a host without
//! the instruction, `--dot-products=portable`) takes the general path of `blocking`.

// The kernel's state, types and imports (`super`), plus what only this file uses.
use super::*;
use crate::ir::kernel::{BinOp, Func};
use inkwell::values::BasicValue;

/// Rows of a register block (6 × 4 vectors: 24 accumulators of the 32 registers).
const ROWS: i64 = 6;

/// Vectors per column panel.
const PANEL: i64 = 4;

/// Which dot-product instruction a contraction runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Isa {
    /// `vdpbf16ps`: 2 bf16 products per f32 lane.
    Bf16,
    /// `vpdpbusd`: 4 u8×i8 products per i32 lane.
    Vnni,
}

impl Isa {
    /// Reduction points per 32-bit lane.
    fn group(self) -> i64 {
        match self {
            Isa::Bf16 => 2,
            Isa::Vnni => 4,
        }
    }
}

/// An operand of the contraction: input `input` at linear offset `at` (in its elements).
#[derive(Clone, Debug)]
struct Operand {
    input: usize,
    at: Affine,
    dtype: DType,
}

/// A statement recognised as a contraction on a dot-product instruction.
#[derive(Clone, Debug)]
struct Contraction {
    isa: Isa,
    /// Output rows (the broadcast operand's other variable), columns (contiguous in the
    /// output and in `b`), and the reduction variable.
    i: usize,
    j: usize,
    k: usize,
    /// Broadcast along `j`, contiguous along `k`.
    a: Operand,
    /// Packed: contiguous along `j`.
    b: Operand,
    /// Whether the f32 sum is rounded to a bf16 result.
    to_bf16: bool,
}

/// `f32(load)` or `i32(load)`: the load's source, index and dtype.
fn cast_load(e: &CExpr, to: DType) -> Option<(usize, &[Affine], DType)> {
    let CKind::Call(Func::Cast(d), args) = &e.kind else {
        return None;
    };
    let [x] = args.as_slice() else { return None };
    match &x.kind {
        CKind::Load {
            src: Src::Input(n),
            index,
            ..
        } if *d == to => Some((*n, index, x.dtype)),
        _ => None,
    }
}

impl<'ctx> K<'_, '_, 'ctx> {
    /// Emits `st` on a dot-product instruction if it is a contraction the host runs on one;
    /// `false` (nothing emitted) otherwise.
    pub(super) fn try_dot(&mut self, st: &CStmt, lv: &[usize]) -> R<bool> {
        let Some(c) = self.contraction(st, lv) else {
            return Ok(false);
        };
        self.emit_dot(st, &c)?;
        Ok(true)
    }

    /// The contraction `st` is, when the host has its instruction.
    fn contraction(&self, st: &CStmt, lv: &[usize]) -> Option<Contraction> {
        let dot = self.g.dot;
        if self.g.w != 16 || !(dot.bf16 || dot.vnni) || lv.len() != 2 || st.vars.len() != 2 {
            return None;
        }
        let Target::Output(_) = st.target else {
            return None;
        };
        let (sum, to_bf16) = match &st.value.kind {
            CKind::Call(Func::Cast(DType::BF16), a) if a.len() == 1 => (&a[0], true),
            _ => (&st.value, false),
        };
        let CKind::Reduce {
            kind: Reduction::Sum,
            vars,
            body,
        } = &sum.kind
        else {
            return None;
        };
        let (isa, to) = match sum.dtype {
            DType::F32 if dot.bf16 => (Isa::Bf16, DType::F32),
            DType::I32 if dot.vnni && !to_bf16 => (Isa::Vnni, DType::I32),
            _ => return None,
        };
        let (CKind::Binary(BinOp::Mul, x, y), [k]) = (&body.kind, vars.as_slice()) else {
            return None;
        };
        let (x, y) = (cast_load(x, to)?, cast_load(y, to)?);
        let dtypes_fit = match isa {
            Isa::Bf16 => x.2 == DType::BF16 && y.2 == DType::BF16,
            Isa::Vnni => matches!((x.2, y.2), (DType::U8, DType::I8) | (DType::I8, DType::U8)),
        };
        if !dtypes_fit || self.pads[x.0].is_some() || self.pads[y.0].is_some() {
            return None;
        }
        let out = self.target_lin(st);
        let j = *lv.iter().find(|&&v| out.coeff(v) == 1)?;
        let i = *lv.iter().find(|&&v| v != j)?;
        let op = |(n, index, dtype): (usize, &[Affine], DType)| Operand {
            input: n,
            at: self.lin(&Src::Input(n), index),
            dtype,
        };
        let (x, y) = (op(x), op(y));
        let only = |a: &Affine| a.terms.iter().all(|t| [i, j, *k].contains(&t.0));
        let is_a = |a: &Operand| a.at.coeff(j) == 0 && a.at.coeff(*k) == 1 && only(&a.at);
        let is_b = |b: &Operand| b.at.coeff(i) == 0 && b.at.coeff(j) == 1 && only(&b.at);
        let (a, b) = if is_a(&x) && is_b(&y) {
            (x, y)
        } else if is_a(&y) && is_b(&x) {
            (y, x)
        } else {
            return None;
        };
        Some(Contraction {
            isa,
            i,
            j,
            k: *k,
            a,
            b,
            to_bf16,
        })
    }

    /// `a`'s offset with the variables `binds` bound (every term's variable is bound).
    fn offset_at(&self, a: &Affine, binds: &[(usize, IntValue<'ctx>)]) -> IntValue<'ctx> {
        let g = self.g;
        let mut acc = g.i64c(a.constant);
        for &(v, c) in &a.terms {
            let x = binds
                .iter()
                .find(|b| b.0 == v)
                .map(|b| b.1)
                .expect("a contraction's operands use only i, j and k");
            let t = g.b.build_int_mul(x, g.i64c(c), "").expect("positioned");
            acc = g.b.build_int_add(acc, t, "").expect("positioned");
        }
        acc
    }

    /// Column panels of `PANEL` vectors, each packed, then its rows in blocks.
    fn emit_dot(&mut self, st: &CStmt, c: &Contraction) -> R<()> {
        let g = self.g;
        let grp = c.isa.group();
        let (klo, khi) = self.inst.vars[c.k].range;
        let groups = (khi - klo + grp - 1) / grp;
        let nb = PANEL * g.w as i64;
        let i32t: BasicTypeEnum = g.cx.i32_type().into();
        let buf = self.malloc_or_fail((groups * nb * 4).max(4));
        let panel = ptr::cast(g.b, buf, i32t);
        let (lo, hi) = (self.lo_of(c.j), self.hi_of(c.j));
        self.lane_blocks(lo, hi, nb, &mut |k, j0, rem| {
            let lanes = k.lane_groups(&[], PANEL, j0, rem);
            k.pack_pairs(c, panel, &lanes)?;
            k.dot_rows(st, c, panel, &lanes)
        })?;
        self.free(panel);
        Ok(())
    }

    /// Packs `b` for the panel of `lanes`: group `q` of the reduction, lane `x` at 32-bit word
    /// `q · nb + x`, its points in increasing bytes; points past the reduction are zero.
    fn pack_pairs(
        &mut self,
        c: &Contraction,
        panel: PointerValue<'ctx>,
        lanes: &[Group<'ctx>],
    ) -> R<()> {
        let g = self.g;
        let grp = c.isa.group();
        let (klo, khi) = self.inst.vars[c.k].range;
        let full = (khi - klo) / grp;
        let left = (khi - klo) % grp;
        let loops = Loops { g, f: self.loops.f };
        loops.counted(self, g.i64c(0), g.i64c(full), 1, vec![], &mut |k, q, _| {
            k.pack_group(c, panel, lanes, q, grp);
            Ok(vec![])
        })?;
        if left > 0 {
            self.pack_group(c, panel, lanes, g.i64c(full), left);
        }
        Ok(())
    }

    /// Packs group `q` (its first `points` points) of every vector of the panel.
    fn pack_group(
        &self,
        c: &Contraction,
        panel: PointerValue<'ctx>,
        lanes: &[Group<'ctx>],
        q: IntValue<'ctx>,
        points: i64,
    ) {
        let g = self.g;
        let grp = c.isa.group();
        let klo = self.inst.vars[c.k].range.0;
        let ety = g.mty(c.b.dtype);
        let bits = 32 / grp;
        let i32t: BasicTypeEnum = g.cx.i32_type().into();
        let nb = PANEL * g.w as i64;
        let k0 = g.b.build_int_mul(q, g.i64c(grp), "").expect("positioned");
        let k0 = g.b.build_int_add(k0, g.i64c(klo), "").expect("positioned");
        for l in lanes {
            let mut word = g.splat(g.i32c(0).into());
            for p in 0..points {
                let kv = g.b.build_int_add(k0, g.i64c(p), "").expect("positioned");
                let j = l.lane_base.expect("panel lanes");
                let off = self.offset_at(&c.b.at, &[(c.j, j), (c.k, kv)]);
                let v = g.vload(
                    ety,
                    ptr::element(g.b, self.bufs[c.b.input], ety, off),
                    l.mask,
                );
                let v = g.cast_to(Op::ZExt, v, i32t);
                let v = g.bin(Op::Shl, v, g.splat(g.i32c(p * bits).into()));
                word = g.bin(Op::Or, word, v);
            }
            let at = g.b.build_int_mul(q, g.i64c(nb), "").expect("positioned");
            let at =
                g.b.build_int_add(at, g.i64c(l.slot * g.w as i64), "")
                    .expect("positioned");
            g.vstore(ptr::element(g.b, panel, i32t, at), word, None);
        }
    }

    /// Every row of the task's range for the packed panel of `lanes`: blocks of [`ROWS`],
    /// then single rows.
    fn dot_rows(
        &mut self,
        st: &CStmt,
        c: &Contraction,
        panel: PointerValue<'ctx>,
        lanes: &[Group<'ctx>],
    ) -> R<()> {
        let g = self.g;
        let (lo, hi) = (self.lo_of(c.i), self.hi_of(c.i));
        let full = self.round_down(lo, hi, ROWS);
        let loops = Loops { g, f: self.loops.f };
        loops.counted(self, lo, full, ROWS, vec![], &mut |k, i0, _| {
            k.dot_tile(st, c, panel, lanes, i0, ROWS)?;
            Ok(vec![])
        })?;
        loops.counted(self, full, hi, 1, vec![], &mut |k, i0, _| {
            k.dot_tile(st, c, panel, lanes, i0, 1)?;
            Ok(vec![])
        })?;
        Ok(())
    }

    /// Rows `i0 .. i0 + rows` of the panel: accumulate every group, then store.
    fn dot_tile(
        &mut self,
        st: &CStmt,
        c: &Contraction,
        panel: PointerValue<'ctx>,
        lanes: &[Group<'ctx>],
        i0: IntValue<'ctx>,
        rows: i64,
    ) -> R<()> {
        let g = self.g;
        let grp = c.isa.group();
        let (klo, khi) = self.inst.vars[c.k].range;
        let (full, left) = ((khi - klo) / grp, (khi - klo) % grp);
        let rows: Vec<IntValue> = (0..rows)
            .map(|r| g.b.build_int_add(i0, g.i64c(r), "").expect("positioned"))
            .collect();
        let zero = match c.isa {
            Isa::Bf16 => g.splat(g.cx.f32_type().const_zero().into()),
            Isa::Vnni => g.splat(g.i32c(0).into()),
        };
        let init = vec![zero; rows.len() * lanes.len()];
        let loops = Loops { g, f: self.loops.f };
        let acc = loops.counted(self, g.i64c(0), g.i64c(full), 1, init, &mut |k, q, acc| {
            Ok(k.dot_step(c, panel, lanes, &rows, q, grp, acc))
        })?;
        let acc = if left > 0 {
            self.dot_step(c, panel, lanes, &rows, g.i64c(full), left, acc)
        } else {
            acc
        };
        self.dot_store(st, c, lanes, &rows, acc);
        Ok(())
    }

    /// One group `q` (its first `points` points) into every accumulator of the tile.
    #[allow(clippy::too_many_arguments)]
    fn dot_step(
        &self,
        c: &Contraction,
        panel: PointerValue<'ctx>,
        lanes: &[Group<'ctx>],
        rows: &[IntValue<'ctx>],
        q: IntValue<'ctx>,
        points: i64,
        acc: Vec<V<'ctx>>,
    ) -> Vec<V<'ctx>> {
        let g = self.g;
        let i32t: BasicTypeEnum = g.cx.i32_type().into();
        let nb = PANEL * g.w as i64;
        let row0 = g.b.build_int_mul(q, g.i64c(nb), "").expect("positioned");
        let bs: Vec<V> = lanes
            .iter()
            .map(|l| {
                let at =
                    g.b.build_int_add(row0, g.i64c(l.slot * g.w as i64), "")
                        .expect("positioned");
                g.vload(i32t, ptr::element(g.b, panel, i32t, at), None)
            })
            .collect();
        let mut out = Vec::with_capacity(acc.len());
        for (r, &i) in rows.iter().enumerate() {
            let a = g.splat(self.a_word(c, i, q, points));
            for (s, &b) in bs.iter().enumerate() {
                let x = acc[r * lanes.len() + s];
                out.push(match (c.isa, c.a.dtype) {
                    (Isa::Bf16, _) => {
                        g.intrinsic("llvm.x86.avx512bf16.dpbf16ps.512", &[], &[x, a, b])
                    }
                    // The unsigned bytes go first.
                    (Isa::Vnni, DType::U8) => {
                        g.intrinsic("llvm.x86.avx512.vpdpbusd.512", &[], &[x, a, b])
                    }
                    (Isa::Vnni, _) => g.intrinsic("llvm.x86.avx512.vpdpbusd.512", &[], &[x, b, a]),
                });
            }
        }
        out
    }

    /// Row `i`'s group `q` of `a` as one 32-bit word: one unaligned load for a full group,
    /// else its `points` elements zero-extended into place (never reading past the row).
    fn a_word(
        &self,
        c: &Contraction,
        i: IntValue<'ctx>,
        q: IntValue<'ctx>,
        points: i64,
    ) -> V<'ctx> {
        let g = self.g;
        let grp = c.isa.group();
        let klo = self.inst.vars[c.k].range.0;
        let ety = g.mty(c.a.dtype);
        let i32t: BasicTypeEnum = g.cx.i32_type().into();
        let k0 = g.b.build_int_mul(q, g.i64c(grp), "").expect("positioned");
        let k0 = g.b.build_int_add(k0, g.i64c(klo), "").expect("positioned");
        let off = self.offset_at(&c.a.at, &[(c.i, i), (c.k, k0)]);
        let p = ptr::element(g.b, self.bufs[c.a.input], ety, off);
        if points == grp {
            let v = ptr::load(g.b, i32t, ptr::cast(g.b, p, i32t));
            if let Some(ins) = v.as_instruction_value() {
                let _ = ins.set_alignment(1);
            }
            return v;
        }
        let bits = 32 / grp;
        let mut word: V = g.i32c(0).into();
        for x in 0..points {
            let e = ptr::element(g.b, p, ety, g.i64c(x));
            let v = g.cast_to(Op::ZExt, ptr::load(g.b, ety, e), i32t);
            let v = g.bin(Op::Shl, v, g.i32c(x * bits).into());
            word = g.bin(Op::Or, word, v);
        }
        word
    }

    /// Stores the tile's accumulators (rounded to bf16 when the result is), masked in the
    /// partial last panel.
    fn dot_store(
        &self,
        st: &CStmt,
        c: &Contraction,
        lanes: &[Group<'ctx>],
        rows: &[IntValue<'ctx>],
        acc: Vec<V<'ctx>>,
    ) {
        let g = self.g;
        let Target::Output(o) = st.target else {
            unreachable!("a contraction writes an output")
        };
        let d = st.value.dtype;
        let ety = g.mty(d);
        let base = self.bufs[self.inst.inputs.len() + o];
        let at = self.target_lin(st);
        for (r, &i) in rows.iter().enumerate() {
            for l in lanes {
                let j = l.lane_base.expect("panel lanes");
                let off = self.offset_at(&at, &[(c.i, i), (c.j, j)]);
                let v = acc[r * lanes.len() + l.slot as usize];
                let v = if c.to_bf16 {
                    g.narrow(v, DType::BF16)
                } else {
                    v
                };
                g.vstore(ptr::element(g.b, base, ety, off), v, l.mask);
            }
        }
    }
}
