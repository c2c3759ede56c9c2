//! Kernels that are not applies: gathers that materialize the selectors a strided view
//! cannot express (concat and interleave operands, repeat, pad, reshape of a non-contiguous
//! view) and generators (`iota`, `rand`) computed from coordinates. Both are plain scalar
//! loop nests over the output (split by the executor along dimension 0) that LLVM's loop
//! vectorizer handles; a constant pad's rows run as fill, a straight copy, fill.

use super::loops::{wrap, Loops};
use super::ops::{Gen, R, V};
use super::ptr;
use super::schedule::DimMap;
use super::target::Host;
use super::view::SView;
use crate::ir::graph::GenKind;
use crate::ir::instance::Scalar;
use crate::ir::DType;
use inkwell::values::InstructionOpcode as Op;
use inkwell::values::{FunctionValue, IntValue, PointerValue};
use inkwell::IntPredicate;

pub(super) struct Nest<'ctx> {
    pub(super) lo: Vec<IntValue<'ctx>>,
    pub(super) hi: Vec<IntValue<'ctx>>,
}

/// Loops over every output dimension, threading `state` (per-level values) down.
pub(super) fn nest<'ctx, S: Clone>(
    loops: &Loops<'_, '_, 'ctx>,
    n: &Nest<'ctx>,
    d: usize,
    state: S,
    step: &mut dyn FnMut(usize, IntValue<'ctx>, &S) -> S,
    leaf: &mut dyn FnMut(&S) -> R<()>,
) -> R<()> {
    if d == n.lo.len() {
        return leaf(&state);
    }
    let mut unit = ();
    loops.counted(&mut unit, n.lo[d], n.hi[d], 1, vec![], &mut |_, iv, _| {
        let s = step(d, iv, &state);
        nest(loops, n, d + 1, s, step, leaf)?;
        Ok(vec![])
    })?;
    Ok(())
}

fn body_params<'ctx>(
    body: FunctionValue<'ctx>,
    nargs: usize,
    rank: usize,
) -> (Vec<PointerValue<'ctx>>, Nest<'ctx>) {
    let p: Vec<_> = body.get_param_iter().collect();
    let bufs = p[..nargs].iter().map(|x| x.into_pointer_value()).collect();
    let lo = (0..rank)
        .map(|d| p[nargs + 2 * d].into_int_value())
        .collect();
    let hi = (0..rank)
        .map(|d| p[nargs + 2 * d + 1].into_int_value())
        .collect();
    (bufs, Nest { lo, hi })
}

/// Per-level state of a gather: source offset, output offset, and whether the point is
/// inside the source (for pads).
#[derive(Clone)]
struct At<'ctx> {
    src: IntValue<'ctx>,
    out: IntValue<'ctx>,
    inside: Option<IntValue<'ctx>>,
}

/// `out[c] = src[map(c)]`, or `fill` where a shifted coordinate leaves the source.
pub fn emit_gather<'ctx>(
    g: &Gen<'_, 'ctx>,
    host: &Host,
    name: &str,
    out: &SView,
    src_strides: &[i64],
    maps: &[DimMap],
    fill: Option<Scalar>,
) -> R<FunctionValue<'ctx>> {
    let d = out.dtype;
    let ety = g.mty(d);
    let (entry, body) = wrap(g, host, name, &[ety, ety], out.shape.len());
    let (bufs, n) = body_params(body, 2, out.shape.len());
    let loops = Loops { g, f: body };
    let b = g.b;
    let start = At {
        src: g.i64c(0),
        out: g.i64c(0),
        inside: None,
    };
    let add = |a: IntValue<'ctx>, x: IntValue<'ctx>, s: i64| {
        let t = b.build_int_mul(x, g.i64c(s), "").expect("positioned");
        b.build_int_add(a, t, "").expect("positioned")
    };
    let i1 = |v: V<'ctx>| v.into_int_value();
    let mut step = |dim: usize, c: IntValue<'ctx>, at: &At<'ctx>| -> At<'ctx> {
        let mut inside = at.inside;
        let s: IntValue = match maps[dim] {
            DimMap::Same => c,
            DimMap::Mod { n } => b
                .build_int_signed_rem(c, g.i64c(n.max(1)), "")
                .expect("positioned"),
            DimMap::Shift { lo, n } => {
                let i = b.build_int_sub(c, g.i64c(lo), "").expect("positioned");
                let ge = i1(g.icmp(IntPredicate::SGE, i.into(), g.i64c(0).into()));
                let lt = i1(g.icmp(IntPredicate::SLT, i.into(), g.i64c(n).into()));
                let ok = b.build_and(ge, lt, "").expect("positioned");
                inside = Some(match inside {
                    Some(p) => b.build_and(p, ok, "").expect("positioned"),
                    None => ok,
                });
                i
            }
            DimMap::Reflect { lo, n } => {
                let i: V = b
                    .build_int_sub(c, g.i64c(lo), "")
                    .expect("positioned")
                    .into();
                let neg = g.icmp(IntPredicate::SLT, i, g.i64c(0).into());
                let mirrored_lo = g.bin(Op::Sub, g.i64c(0).into(), i);
                let over = g.icmp(IntPredicate::SGE, i, g.i64c(n).into());
                let mirrored_hi = g.bin(Op::Sub, g.i64c(2 * (n - 1)).into(), i);
                let r = g.select(over, mirrored_hi, i);
                i1(g.select(neg, mirrored_lo, r))
            }
        };
        At {
            src: add(at.src, s, src_strides[dim]),
            out: add(at.out, c, out.strides[dim]),
            inside,
        }
    };
    let mut leaf = |at: &At<'ctx>| -> R<()> {
        let v = match (at.inside, fill) {
            (Some(ok), Some(f)) => {
                let safe = i1(g.select(ok.into(), at.src.into(), g.i64c(0).into()));
                let x = ptr::load(b, ety, ptr::element(b, bufs[0], ety, safe));
                let c = g.narrow(g.konst(f, d), d);
                g.select(ok.into(), x, c)
            }
            _ => ptr::load(b, ety, ptr::element(b, bufs[0], ety, at.src)),
        };
        ptr::store(b, ptr::element(b, bufs[1], ety, at.out), v);
        Ok(())
    };
    let last = out.shape.len().checked_sub(1);
    match (last.map(|l| &maps[l]), fill) {
        // A constant pad along the innermost dim: each row is fill, a straight copy, fill (so
        // the copy vectorises with no per-element bounds check or clamped address).
        (Some(&DimMap::Shift { lo, n: len }), Some(f)) => {
            let l = last.expect("a last dim");
            let rows = Nest {
                lo: n.lo[..l].to_vec(),
                hi: n.hi[..l].to_vec(),
            };
            let row = Row {
                lo: n.lo[l],
                hi: n.hi[l],
                shift: lo,
                len,
                src_stride: src_strides[l],
                out_stride: out.strides[l],
            };
            let fill = g.narrow(g.konst(f, d), d);
            let mut leaf = |at: &At<'ctx>| padded_row(g, &loops, &bufs, ety, at, &row, fill);
            nest(&loops, &rows, 0, start, &mut step, &mut leaf)?;
        }
        _ => nest(&loops, &n, 0, start, &mut step, &mut leaf)?,
    }
    b.build_return(Some(&g.cx.i32_type().const_zero()))
        .expect("positioned");
    Ok(entry)
}

/// The innermost dim of a constant pad: output coordinates `lo..hi` of this chunk, reading
/// source element `c - shift` where `0 <= c - shift < len`.
struct Row<'ctx> {
    lo: IntValue<'ctx>,
    hi: IntValue<'ctx>,
    shift: i64,
    len: i64,
    src_stride: i64,
    out_stride: i64,
}

/// One output row of a constant pad at `at` (outer coordinates bound): fill up to the
/// source's first element, the source's run copied, fill after it; all fill when an outer
/// coordinate is outside the source.
fn padded_row<'ctx>(
    g: &Gen<'_, 'ctx>,
    loops: &Loops<'_, '_, 'ctx>,
    bufs: &[PointerValue<'ctx>],
    ety: inkwell::types::BasicTypeEnum<'ctx>,
    at: &At<'ctx>,
    r: &Row<'ctx>,
    fill: V<'ctx>,
) -> R<()> {
    let b = g.b;
    let clamp = |x: i64| {
        let x = g.i64c(x);
        let below = g.icmp(IntPredicate::SLT, x.into(), r.lo.into());
        let x = g.select(below, r.lo.into(), x.into());
        let above = g.icmp(IntPredicate::SGT, x, r.hi.into());
        g.select(above, r.hi.into(), x).into_int_value()
    };
    let (mut a, mut e) = (clamp(r.shift), clamp(r.shift + r.len));
    if let Some(ok) = at.inside {
        a = g.select(ok.into(), a.into(), r.hi.into()).into_int_value();
        e = g.select(ok.into(), e.into(), r.hi.into()).into_int_value();
    }
    let at_out = |c: IntValue<'ctx>, stride: i64, base: IntValue<'ctx>| {
        let t = b.build_int_mul(c, g.i64c(stride), "").expect("positioned");
        b.build_int_add(base, t, "").expect("positioned")
    };
    let mut unit = ();
    for (from, to) in [(r.lo, a), (e, r.hi)] {
        loops.counted(&mut unit, from, to, 1, vec![], &mut |_, c, _| {
            let o = at_out(c, r.out_stride, at.out);
            ptr::store(b, ptr::element(b, bufs[1], ety, o), fill);
            Ok(vec![])
        })?;
    }
    loops.counted(&mut unit, a, e, 1, vec![], &mut |_, c, _| {
        let i = b.build_int_sub(c, g.i64c(r.shift), "").expect("positioned");
        let x = ptr::load(
            b,
            ety,
            ptr::element(b, bufs[0], ety, at_out(i, r.src_stride, at.src)),
        );
        let o = at_out(c, r.out_stride, at.out);
        ptr::store(b, ptr::element(b, bufs[1], ety, o), x);
        Ok(vec![])
    })?;
    Ok(())
}

/// splitmix64, as `interp/scalar.rs`.
fn splitmix<'ctx>(g: &Gen<'_, 'ctx>, z: IntValue<'ctx>) -> IntValue<'ctx> {
    let b = g.b;
    let c = |v: u64| g.cx.i64_type().const_int(v, false);
    let z = b
        .build_int_add(z, c(0x9E37_79B9_7F4A_7C15), "")
        .expect("positioned");
    let x = b
        .build_right_shift(z, c(30), false, "")
        .expect("positioned");
    let z = b
        .build_int_mul(
            b.build_xor(z, x, "").expect("positioned"),
            c(0xBF58_476D_1CE4_E5B9),
            "",
        )
        .expect("positioned");
    let x = b
        .build_right_shift(z, c(27), false, "")
        .expect("positioned");
    let z = b
        .build_int_mul(
            b.build_xor(z, x, "").expect("positioned"),
            c(0x94D0_49BB_1331_11EB),
            "",
        )
        .expect("positioned");
    let x = b
        .build_right_shift(z, c(31), false, "")
        .expect("positioned");
    b.build_xor(z, x, "").expect("positioned")
}

/// `iota` (the coordinate along an axis) and `rand` (a hash of the seed and coordinates).
pub fn emit_generate<'ctx>(
    g: &Gen<'_, 'ctx>,
    host: &Host,
    name: &str,
    out: &SView,
    kind: GenKind,
) -> R<FunctionValue<'ctx>> {
    let d = out.dtype;
    let ety = g.mty(d);
    let (entry, body) = wrap(g, host, name, &[ety], out.shape.len());
    let (bufs, n) = body_params(body, 1, out.shape.len());
    let loops = Loops { g, f: body };
    let b = g.b;
    // State: (output offset, hash so far or the iota coordinate).
    let seed_hash = match kind {
        GenKind::Rand { seed } => {
            let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        _ => 0,
    };
    let start = (g.i64c(0), g.cx.i64_type().const_int(seed_hash, false));
    let mut step = |dim: usize, c: IntValue<'ctx>, s: &(IntValue<'ctx>, IntValue<'ctx>)| {
        let t = b
            .build_int_mul(c, g.i64c(out.strides[dim]), "")
            .expect("positioned");
        let off = b.build_int_add(s.0, t, "").expect("positioned");
        let h = match kind {
            GenKind::Rand { .. } => splitmix(g, b.build_xor(s.1, c, "").expect("positioned")),
            GenKind::Iota { axis } if axis == dim => c,
            _ => s.1,
        };
        (off, h)
    };
    let mut leaf = |s: &(IntValue<'ctx>, IntValue<'ctx>)| -> R<()> {
        let h = s.1;
        let v: V = match (kind, d) {
            (GenKind::Iota { .. }, _) => g.cast(h.into(), DType::I64, d),
            (GenKind::Rand { .. }, _) => rand_value(g, h, d),
            (other, _) => return Err(format!("{} is not computed by a kernel", other.name())),
        };
        let v = g.narrow(v, d);
        ptr::store(b, ptr::element(b, bufs[0], ety, s.0), v);
        Ok(())
    };
    nest(&loops, &n, 0, start, &mut step, &mut leaf)?;
    b.build_return(Some(&g.cx.i32_type().const_zero()))
        .expect("positioned");
    Ok(entry)
}

/// The `rand` element of dtype `d` for hash `h` (docs/teg.md §10): a float takes the top bits
/// of the hash (as many as its significand has) times 2^-bits, uniform in [0, 1); an integer
/// its low bits; a bool its lowest bit.
fn rand_value<'ctx>(g: &Gen<'_, 'ctx>, h: IntValue<'ctx>, d: DType) -> V<'ctx> {
    let bits = match d {
        DType::F64 => 53,
        DType::F32 => 24,
        DType::F16 => 11,
        DType::BF16 => 8,
        DType::Bool => {
            return g.cast_to(
                Op::Trunc,
                g.bin(Op::And, h.into(), g.i64c(1).into()),
                g.sty(d),
            )
        }
        DType::I64 | DType::U64 => return h.into(),
        _ => return g.cast_to(Op::Trunc, h.into(), g.sty(d)),
    };
    let top = g.bin(Op::LShr, h.into(), g.i64c(64 - bits).into());
    let f = g.cast_to(Op::UIToFP, top, g.sty(d));
    let scale = 1.0 / (1u64 << bits) as f64;
    let wide = if d.is_half() { DType::F32 } else { d };
    g.bin(Op::FMul, f, g.konst(Scalar::F(scale), wide))
}
