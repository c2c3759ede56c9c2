//! The kernel of `scatter %base, %idx, %upd axis A reduce R` (docs/teg.md §9.1): a loop nest
//! over the updates' dimensions other than `A` (the executor splits the first of them, so each
//! task owns whole lines of the result along `A`). Per line it copies the base's line, then
//! visits the updates in index order: loads the index, wraps a negative one once, checks it
//! against the dimension before any address is formed (an out-of-range index calls the
//! runtime's `tapc_rt_scatter_fault` and the kernel returns status 2), and combines the update
//! into the result. Elements are computed as the interpreter does (`ops`' `combine`), so the
//! result is the same bit for bit, duplicates included (index order within a line).

use super::copy::{nest, Nest};
use super::loops::{wrap, Loops};
use super::ops::{Gen, R, V};
use super::ptr;
use super::target::Host;
use super::view::{row_major, SView};
use crate::ir::graph::ScatterReduce;
use crate::ir::kernel::Reduction;
use crate::ir::DType;
use inkwell::values::InstructionOpcode as Op;
use inkwell::values::{FunctionValue, IntValue, PointerValue};
use inkwell::IntPredicate;

/// The runtime function a scatter kernel calls on an out-of-range index.
pub const SCATTER_FAULT: &str = "tapc_rt_scatter_fault";

/// What a scatter kernel needs: the views of its arguments (base, indices, updates, result),
/// the axis, the reduction and the fault text (the scatter, the index tensor's name, its shape).
#[derive(Clone, Debug, PartialEq)]
pub struct ScatterSpec {
    pub base: SView,
    pub idx: SView,
    pub upd: SView,
    pub out: SView,
    pub axis: usize,
    pub reduce: ScatterReduce,
    pub text: String,
}

impl ScatterSpec {
    fn views(&self) -> [&SView; 4] {
        [&self.base, &self.idx, &self.upd, &self.out]
    }
}

/// Offsets (elements) into base, idx, upd, out, and the row-major position in idx.
type At<'ctx> = [IntValue<'ctx>; 5];

/// Emits the kernel `name` of scatter `s`.
pub fn emit_scatter<'ctx>(
    g: &Gen<'_, 'ctx>,
    host: &Host,
    name: &str,
    s: &ScatterSpec,
) -> R<FunctionValue<'ctx>> {
    if s.views().iter().any(|v| v.pad.is_some()) {
        return Err("a scatter of a padded view is not supported natively".into());
    }
    let rank = s.upd.shape.len();
    let tys: Vec<_> = s.views().iter().map(|v| g.mty(v.dtype)).collect();
    let (entry, body) = wrap(g, host, name, &tys, rank);
    let p: Vec<_> = body.get_param_iter().collect();
    let bufs: Vec<PointerValue> = p[..4].iter().map(|x| x.into_pointer_value()).collect();
    let dims: Vec<usize> = (0..rank).filter(|&d| d != s.axis).collect();
    let n = Nest {
        lo: dims
            .iter()
            .map(|&d| p[4 + 2 * d].into_int_value())
            .collect(),
        hi: dims
            .iter()
            .map(|&d| p[4 + 2 * d + 1].into_int_value())
            .collect(),
    };
    let loops = Loops { g, f: body };
    let pos_strides = row_major(&s.idx.shape);
    let b = g.b;
    let mul_add = |a: IntValue<'ctx>, x: IntValue<'ctx>, k: i64| {
        let t = b.build_int_mul(x, g.i64c(k), "").expect("positioned");
        b.build_int_add(a, t, "").expect("positioned")
    };
    let mut step = |level: usize, c: IntValue<'ctx>, at: &At<'ctx>| -> At<'ctx> {
        let d = dims[level];
        let mut next = *at;
        for (k, v) in s.views().iter().enumerate() {
            next[k] = mul_add(at[k], c, v.strides[d]);
        }
        next[4] = mul_add(at[4], c, pos_strides[d]);
        next
    };
    let mut leaf = |at: &At<'ctx>| -> R<()> {
        copy_line(g, &loops, s, &bufs, &tys, at)?;
        update_line(g, &loops, s, &bufs, &tys, at, pos_strides[s.axis])
    };
    nest(&loops, &n, 0, [g.i64c(0); 5], &mut step, &mut leaf)?;
    b.build_return(Some(&g.cx.i32_type().const_zero()))
        .expect("positioned");
    Ok(entry)
}

/// `out[line, j] = base[line, j]` for every `j` along the axis.
fn copy_line<'ctx>(
    g: &Gen<'_, 'ctx>,
    loops: &Loops<'_, '_, 'ctx>,
    s: &ScatterSpec,
    bufs: &[PointerValue<'ctx>],
    tys: &[inkwell::types::BasicTypeEnum<'ctx>],
    at: &At<'ctx>,
) -> R<()> {
    let b = g.b;
    let size = g.i64c(s.base.shape[s.axis]);
    let mut unit = ();
    loops.counted(&mut unit, g.i64c(0), size, 1, vec![], &mut |_, j, _| {
        let src = b
            .build_int_add(at[0], mul(g, j, s.base.strides[s.axis]), "")
            .expect("positioned");
        let dst = b
            .build_int_add(at[3], mul(g, j, s.out.strides[s.axis]), "")
            .expect("positioned");
        let v = ptr::load(b, tys[0], ptr::element(b, bufs[0], tys[0], src));
        ptr::store(b, ptr::element(b, bufs[3], tys[3], dst), v);
        Ok(vec![])
    })?;
    Ok(())
}

fn mul<'ctx>(g: &Gen<'_, 'ctx>, x: IntValue<'ctx>, k: i64) -> IntValue<'ctx> {
    g.b.build_int_mul(x, g.i64c(k), "").expect("positioned")
}

/// The updates of one line, in index order, combined into the result.
fn update_line<'ctx>(
    g: &Gen<'_, 'ctx>,
    loops: &Loops<'_, '_, 'ctx>,
    s: &ScatterSpec,
    bufs: &[PointerValue<'ctx>],
    tys: &[inkwell::types::BasicTypeEnum<'ctx>],
    at: &At<'ctx>,
    pos_stride: i64,
) -> R<()> {
    let b = g.b;
    let count = g.i64c(s.upd.shape[s.axis]);
    let size = s.base.shape[s.axis];
    let add = |a: IntValue<'ctx>, x: IntValue<'ctx>| b.build_int_add(a, x, "").expect("positioned");
    let mut unit = ();
    loops.counted(&mut unit, g.i64c(0), count, 1, vec![], &mut |_, i, _| {
        let io = add(at[1], mul(g, i, s.idx.strides[s.axis]));
        let raw = ptr::load(b, tys[1], ptr::element(b, bufs[1], tys[1], io));
        let x = g.cast(g.widen(raw, s.idx.dtype), s.idx.dtype, DType::I64);
        let zero = g.i64c(0).into();
        let neg = g.icmp(IntPredicate::SLT, x, zero);
        let j = g.select(neg, g.bin(Op::Add, x, g.i64c(size).into()), x);
        let bad = g.icmp(IntPredicate::UGE, j, g.i64c(size).into());
        let pos = add(at[4], mul(g, i, pos_stride));
        check(
            g,
            loops.f,
            s,
            bad.into_int_value(),
            pos,
            x.into_int_value(),
            size,
        );
        let oo = add(at[3], mul(g, j.into_int_value(), s.out.strides[s.axis]));
        let uo = add(at[2], mul(g, i, s.upd.strides[s.axis]));
        let u = ptr::load(b, tys[2], ptr::element(b, bufs[2], tys[2], uo));
        let slot = ptr::element(b, bufs[3], tys[3], oo);
        let v = match reduction(s.reduce) {
            None => u,
            Some(r) => {
                let d = s.out.dtype;
                let acc = g.widen(ptr::load(b, tys[3], slot), d);
                g.narrow(g.combine(r, acc, g.widen(u, d), d)?, d)
            }
        };
        ptr::store(b, slot, v);
        Ok(vec![])
    })?;
    Ok(())
}

/// The reduction step a scatter combines with (`None`: the update replaces).
fn reduction(r: ScatterReduce) -> Option<Reduction> {
    match r {
        ScatterReduce::None => None,
        ScatterReduce::Add => Some(Reduction::Sum),
        ScatterReduce::Max => Some(Reduction::Max),
        ScatterReduce::Min => Some(Reduction::Min),
    }
}

/// Branches to a fault report (and status 2) when `bad`; `x` is the unwrapped index.
fn check<'ctx>(
    g: &Gen<'_, 'ctx>,
    f: FunctionValue<'ctx>,
    s: &ScatterSpec,
    bad: IntValue<'ctx>,
    pos: IntValue<'ctx>,
    x: IntValue<'ctx>,
    size: i64,
) {
    let fault = g.cx.append_basic_block(f, "scatter_oob");
    let ok = g.cx.append_basic_block(f, "scatter_ok");
    g.b.build_conditional_branch(bad, fault, ok)
        .expect("positioned");
    g.b.position_at_end(fault);
    let text = ptr::string(g.b, &s.text);
    let report = ptr::gather_fault_fn(g.cx, g.m, SCATTER_FAULT);
    let args: [V; 5] = [
        text.into(),
        g.i64c(s.text.len() as i64).into(),
        pos.into(),
        x.into(),
        g.i64c(size).into(),
    ];
    g.call_void(report, &args);
    g.b.build_return(Some(&g.cx.i32_type().const_int(2, false)))
        .expect("positioned");
    g.b.position_at_end(ok);
}
