//! One LLVM function per apply: the kernel's statements as loop nests over a sub-range of the
//! index space (the task's chunk), reading and writing strided views whose strides are
//! compiled in.
//!
//! Structure of a kernel:
//! - **Fusion.** A multi-statement kernel (softmax: `m[i]`, `s[i]`, `y[i, j]`) loops once over
//!   its *fused* variables, those every statement is indexed by and every temporary is read at
//!   exactly (`t[i]`, never `t[i + 1]`), and runs each statement for the current point, so
//!   temporaries stay small and in cache. Fused variables are also where the executor may split
//!   a task into chunks ([`KernelPlan::split`]).
//! - **Vector lanes over the output's contiguous dimension.** A statement's innermost loop is
//!   the variable along which its target is contiguous; it runs `lanes` points at a time as LLVM
//!   vectors (masked at the end of a row), loading with vector loads where the access is
//!   contiguous, gathers where strided, and broadcasts where it does not vary.
//! - **Reductions in registers.** A reduction inside a vectorised statement accumulates in
//!   vector registers, in index order per point (so results equal the interpreter's); with a
//!   second output variable whose loads are reused (matmul's `i`), several rows are computed at
//!   once (register blocking).
//! - **Documented reassociation.** A statement without a vectorisable output dimension whose
//!   reduction runs over a contiguous input dimension (softmax's `sum[j]`, a row sum) is
//!   vectorised *along the reduction*: `lanes` (up to 4 × `lanes`) partial accumulators
//!   combined pairwise at the end. For `max`/`min` and integer sums this is exact; for float
//!   `sum`/`prod` it is a reassociation whose rounding differs from the interpreter's
//!   sequential order by at most a few ulps times the reduction length (tests use a relative
//!   tolerance of 1e-4 for floats). A deep 1×1 conv on a tiny map is reassociated the same
//!   way (dot products along its input channels, see `implicit`), except with
//!   `--fp-contract=off`.
//!
//! Files: [`plan`] (fusion and split decided before code generation, also used by the
//! scheduler), `access` (loads and stores through strided views and folded pads), `reduce`
//! (reductions in registers, fused multiply-adds, vectorised along a contiguous reduction),
//! `blocking` (register blocking: the tile a vectorised statement gets, lane panels times row
//! blocks, edge tiles), `stream` (reductions streamed along whole rows of a wide operand,
//! 4 rows at a time), `share` (a row's math-function values computed once for a row sum and
//! a later statement: softmax's `exp`), `pack` (panels of a reused operand copied
//! contiguous), `implicit` (a convolution over a small map as an implicit GEMM over its
//! flattened positions, and a deep 1×1 conv on a tiny map as dot products along the input
//! channels) and `dot` (bf16 and u8×i8 contractions on the host's dot-product
//! instructions, tried first). This file holds the kernel's state and the statement loops.
//! It imports only `plan` and `share` (which import nothing of it); the other files extend
//! [`K`] with methods, so no two files import each other.

mod access;
mod blocking;
mod dot;
pub mod gather;
mod implicit;
mod pack;
pub mod plan;
mod reduce;
mod share;
mod stream;

pub use implicit::implicit_gemms;
pub use plan::KernelPlan;

use super::epilogue::{has_reduce, inline_epilogues};
use super::loops::{wrap, Loops};
use super::ops::{Gen, R, V};
use super::ptr;
use super::target::Host;
use super::view::{row_major, Padding, SView};
use crate::ir::instance::visit_loads;
use crate::ir::instance::{Affine, CExpr, CKind, CStmt, Instance, Src, Target};
use crate::ir::kernel::Reduction;
use crate::ir::DType;
use inkwell::basic_block::BasicBlock;
use inkwell::types::BasicTypeEnum;
use inkwell::values::InstructionOpcode as Op;
use inkwell::values::{BasicValueEnum, FunctionValue, IntValue, PointerValue, VectorValue};
use inkwell::IntPredicate;

/// Values of the variables that differ between the groups evaluated together.
#[derive(Clone)]
struct Group<'ctx> {
    over: Vec<(usize, IntValue<'ctx>)>,
    /// The lane variable's value in lane 0.
    lane_base: Option<IntValue<'ctx>>,
    /// Which lanes are real points (`None`: all).
    mask: Option<VectorValue<'ctx>>,
    /// Which vector of a panel this group is (selects its part of a packed panel).
    slot: i64,
    /// Which row of a position tile this group is (selects its column of a packed input
    /// tile, see `implicit`).
    row: i64,
}

/// A panel of a reused operand copied to a contiguous buffer (see [`K::panels`]).
#[derive(Clone)]
struct Packed<'ctx> {
    src: Src,
    index: Vec<Affine>,
    /// The reduction variables the panel is indexed by, outermost first.
    rvars: Vec<usize>,
    ptr: PointerValue<'ctx>,
    /// Elements per reduction point (the panel width).
    width: i64,
    dtype: DType,
}

/// An operand worth packing: its source and index, the reduction variables it moves with
/// (outermost first) and its dtype.
type PackCand = (Src, Vec<Affine>, Vec<usize>, DType);

/// A register tile: lane variable `j` in panels of `u` vectors, times `rows` points of block
/// variable `i` (or, for an implicit GEMM, of the flattened positions).
#[derive(Clone, Copy)]
struct Shape {
    j: usize,
    u: i64,
    i: usize,
    rows: i64,
}

/// What one evaluation computes: `groups.len()` results, vectors along `lane`.
#[derive(Clone)]
struct Cx<'ctx> {
    lane: Option<usize>,
    groups: Vec<Group<'ctx>>,
}

/// The body of static reduction loops: current accumulators in, updated ones out.
type ReduceBody<'s, K, T> = dyn FnMut(&mut K, Vec<T>) -> R<Vec<T>> + 's;

/// The body of a block of lanes: its first lane, and how many lanes are left in a partial
/// last block (`None`: a full block).
type BlockBody<'s, 'ctx, K> =
    dyn FnMut(&mut K, IntValue<'ctx>, Option<IntValue<'ctx>>) -> R<()> + 's;

struct TempBuf<'ctx> {
    ptr: PointerValue<'ctx>,
    /// Per temp dimension (0 for fused dimensions: one point at a time).
    strides: Vec<i64>,
    heap: bool,
}

struct K<'k, 'a, 'ctx> {
    g: &'k Gen<'a, 'ctx>,
    loops: Loops<'k, 'a, 'ctx>,
    inst: &'k Instance,
    bufs: Vec<PointerValue<'ctx>>,
    in_strides: Vec<Vec<i64>>,
    /// Per input: a constant pad folded into its loads.
    pads: Vec<Option<Padding>>,
    /// Per padded input: the element offset of one element its view can read, which a masked
    /// scalar load reads instead (so no address outside the view's reach is touched), or
    /// `None` when the view reads nothing but fill.
    pad_safe: Vec<Option<i64>>,
    out_strides: Vec<Vec<i64>>,
    lo: Vec<IntValue<'ctx>>,
    hi: Vec<IntValue<'ctx>>,
    env: Vec<Option<IntValue<'ctx>>>,
    temps: Vec<TempBuf<'ctx>>,
    fused: Vec<bool>,
    /// Returns 1 (allocation failure) from the body.
    fail: Option<BasicBlock<'ctx>>,
    /// Panels packed for the statement being emitted.
    packed: Vec<Packed<'ctx>>,
    /// Top-level reductions already evaluated for the current tile (an inlined epilogue may
    /// read one several times), with the number of groups they were evaluated for.
    memo: Vec<(CExpr, usize, Vec<V<'ctx>>)>,
    /// How many reductions enclose the expression being evaluated.
    depth: usize,
    /// The input gathered into position tiles for an implicit GEMM (see `implicit`).
    rowpack: Option<implicit::RowPack<'ctx>>,
}

/// See [`K::pad_safe`]: the first corner of the inner box a padded view can read.
fn pad_safe(v: &SView) -> Option<i64> {
    let bx = v.pad.as_ref()?.readable(&v.shape);
    if bx.iter().any(|&(l, h)| h <= l) {
        return None;
    }
    Some(bx.iter().zip(&v.strides).map(|((l, _), s)| l * s).sum())
}

/// Largest temporary kept on the stack; bigger ones are heap allocated.
const STACK_TEMP_BYTES: i64 = 64 << 10;

/// Compiles the kernel of `inst` as exported function `name`.
#[allow(clippy::too_many_arguments)]
pub fn emit<'ctx>(
    g: &Gen<'_, 'ctx>,
    host: &Host,
    name: &str,
    inst: &Instance,
    inputs: &[SView],
    outputs: &[SView],
    kp: &KernelPlan,
) -> R<FunctionValue<'ctx>> {
    if inst.stmts.is_none() {
        return Err("an extern op without a kernel".into());
    }
    let stmts = inline_epilogues(inst);
    let shared = share::share_rows(inst, &stmts, &kp.fused);
    let (inst, stmts) = match &shared {
        Some((i, s)) => (i, &s[..]),
        None => (inst, &stmts[..]),
    };
    let tys: Vec<BasicTypeEnum> = inputs
        .iter()
        .chain(outputs)
        .map(|v| g.mty(v.dtype))
        .collect();
    let np = inst.parallel;
    let (entry, body) = wrap(g, host, name, &tys, np);
    let params: Vec<BasicValueEnum> = body.get_param_iter().collect();
    let nargs = tys.len();
    let mut fused = vec![false; inst.vars.len()];
    for &v in &kp.fused {
        fused[v] = true;
    }
    let mut k = K {
        g,
        loops: Loops { g, f: body },
        inst,
        bufs: params[..nargs]
            .iter()
            .map(|p| p.into_pointer_value())
            .collect(),
        in_strides: inputs.iter().map(|v| v.strides.clone()).collect(),
        pads: inputs.iter().map(|v| v.pad.clone()).collect(),
        pad_safe: inputs.iter().map(pad_safe).collect(),
        out_strides: outputs.iter().map(|v| v.strides.clone()).collect(),
        lo: (0..np)
            .map(|d| params[nargs + 2 * d].into_int_value())
            .collect(),
        hi: (0..np)
            .map(|d| params[nargs + 2 * d + 1].into_int_value())
            .collect(),
        env: vec![None; inst.vars.len()],
        temps: vec![],
        fused,
        fail: None,
        packed: vec![],
        memo: vec![],
        depth: 0,
        rowpack: None,
    };
    k.alloc_temps(stmts)?;
    // The fused variables loop once around all statements.
    k.point_loops(&kp.fused, &mut |k| {
        stmts.iter().try_for_each(|st| k.stmt(st))
    })?;
    for t in &k.temps {
        if t.heap {
            k.free(t.ptr);
        }
    }
    g.b.build_return(Some(&g.cx.i32_type().const_zero()))
        .expect("positioned");
    if let Some(fail) = k.fail {
        g.b.position_at_end(fail);
        g.b.build_return(Some(&g.cx.i32_type().const_int(1, false)))
            .expect("positioned");
    }
    Ok(entry)
}

/// `Σ c·(a_d − base_d)·stride_d` as one affine function.
pub fn linear(index: &[Affine], strides: &[i64], bases: &[i64]) -> Affine {
    let mut out = Affine::default();
    for ((a, &s), &b) in index.iter().zip(strides).zip(bases) {
        if s == 0 {
            continue;
        }
        for &(v, c) in &a.terms {
            let c = c.wrapping_mul(s);
            match out.terms.iter_mut().find(|t| t.0 == v) {
                Some(t) => t.1 = t.1.wrapping_add(c),
                None => out.terms.push((v, c)),
            }
        }
        out.constant = out
            .constant
            .wrapping_add(a.constant.wrapping_sub(b).wrapping_mul(s));
    }
    out.terms.retain(|t| t.1 != 0);
    out
}

impl<'ctx> K<'_, '_, 'ctx> {
    fn static_lo(&self, v: usize) -> i64 {
        self.inst.vars[v].range.0
    }

    /// `malloc(bytes)`, leaving the kernel with status 1 (see [`K::fail`]) when it returns
    /// null.
    fn malloc_or_fail(&mut self, bytes: i64) -> PointerValue<'ctx> {
        self.malloc_bytes(self.g.i64c(bytes))
    }

    /// [`K::malloc_or_fail`] of a size known at run time.
    fn malloc_bytes(&mut self, bytes: IntValue<'ctx>) -> PointerValue<'ctx> {
        let g = self.g;
        let (malloc, _) = ptr::libc_alloc(g.cx, g.m);
        let p = g.call(malloc, &[bytes.into()]).into_pointer_value();
        let null = g.b.build_is_null(p, "").expect("positioned");
        let fail = *self
            .fail
            .get_or_insert_with(|| g.cx.append_basic_block(self.loops.f, "oom"));
        let ok = g.cx.append_basic_block(self.loops.f, "allocated");
        g.b.build_conditional_branch(null, fail, ok)
            .expect("positioned");
        g.b.position_at_end(ok);
        p
    }

    /// `free(p)` for a pointer from [`K::malloc_or_fail`].
    fn free(&self, p: PointerValue<'ctx>) {
        let g = self.g;
        let (_, free) = ptr::libc_alloc(g.cx, g.m);
        let p = ptr::cast(g.b, p, g.cx.i8_type().into());
        g.call_void(free, &[p.into()]);
    }

    /// Allocates the temporaries `stmts` write (an inlined one gets none: its pointer is null).
    fn alloc_temps(&mut self, stmts: &[CStmt]) -> R<()> {
        let g = self.g;
        for (ti, t) in self.inst.temps.iter().enumerate() {
            if !stmts.iter().any(|s| s.target == Target::Temp(ti)) {
                self.temps.push(TempBuf {
                    ptr: ptr::ptr_to(g.mty(t.dtype)).const_null(),
                    strides: vec![0; t.vars.len()],
                    heap: false,
                });
                continue;
            }
            let dims: Vec<i64> = t
                .vars
                .iter()
                .map(|&v| {
                    if self.fused[v] {
                        1
                    } else {
                        self.inst.extent(v).max(1)
                    }
                })
                .collect();
            let mut strides = row_major(&dims);
            for (d, &v) in t.vars.iter().enumerate() {
                if self.fused[v] {
                    strides[d] = 0;
                }
            }
            let n: i64 = dims.iter().product::<i64>().max(1);
            let bytes = n * t.dtype.size_bytes() as i64;
            let ety = g.mty(t.dtype);
            let (p, heap) = if bytes <= STACK_TEMP_BYTES {
                let arr = g.cx.i8_type().array_type(bytes as u32);
                let a = g.b.build_alloca(arr, &t.name).expect("positioned");
                if let Some(i) = a.as_instruction() {
                    let _ = i.set_alignment(64);
                }
                (a, false)
            } else {
                (self.malloc_or_fail(bytes), true)
            };
            self.temps.push(TempBuf {
                ptr: ptr::cast(g.b, p, ety),
                strides,
                heap,
            });
        }
        Ok(())
    }

    fn eval(&mut self, e: &CExpr, cx: &Cx<'ctx>) -> R<Vec<V<'ctx>>> {
        let g = self.g;
        let n = cx.groups.len();
        if n > 1 {
            let mut varying: Vec<usize> = cx.groups[0].over.iter().map(|o| o.0).collect();
            varying.extend(cx.lane);
            if !self.depends(e, &varying) {
                let one = Cx {
                    lane: cx.lane,
                    groups: cx.groups[..1].to_vec(),
                };
                let v = self.eval(e, &one)?;
                return Ok(vec![v[0]; n]);
            }
        }
        let d = e.dtype;
        Ok(match &e.kind {
            CKind::Const(s) => vec![g.konst(*s, d); n],
            CKind::Var(v) => cx
                .groups
                .iter()
                .map(|grp| {
                    let x: V = match (Some(*v) == cx.lane, grp.lane_base) {
                        (true, Some(b)) => g.bin(Op::Add, g.splat(b.into()), g.iota().into()),
                        _ => self.var(*v, grp).into(),
                    };
                    g.cast(x, DType::I64, d)
                })
                .collect(),
            CKind::Load { src, index, .. } => self.load(src, index, d, cx),
            CKind::Gather(ga) => self.gather(ga, d, cx)?,
            CKind::Reduce { kind, vars, body } => {
                let n = cx.groups.len();
                if self.depth == 0 {
                    if let Some(m) = self.memo.iter().find(|m| m.1 == n && m.0 == *e) {
                        return Ok(m.2.clone());
                    }
                }
                self.depth += 1;
                let r = self.reduce(*kind, vars, body, d, cx);
                self.depth -= 1;
                let r = r?;
                if self.depth == 0 {
                    self.memo.push((e.clone(), n, r.clone()));
                }
                r
            }
            CKind::Call(f, args) => {
                let vals: Vec<Vec<V>> = args.iter().map(|a| self.eval(a, cx)).collect::<R<_>>()?;
                let ad: Vec<DType> = args.iter().map(|a| a.dtype).collect();
                (0..n)
                    .map(|i| {
                        let a: Vec<V> = vals.iter().map(|v| v[i]).collect();
                        g.func(*f, &a, &ad, d)
                    })
                    .collect::<R<_>>()?
            }
            CKind::Unary(op, a) => {
                let va = self.eval(a, cx)?;
                va.into_iter()
                    .map(|x| g.unary(*op, x, a.dtype))
                    .collect::<R<_>>()?
            }
            CKind::Binary(op, a, b) => {
                let va = self.eval(a, cx)?;
                let vb = self.eval(b, cx)?;
                va.into_iter()
                    .zip(vb)
                    .map(|(x, y)| g.binary(*op, x, y, a.dtype))
                    .collect::<R<_>>()?
            }
        })
    }

    /// One statement at every point of its non-fused variables: vectorised along its lane
    /// variable (register blocked when it reduces), or one point at a time.
    fn stmt(&mut self, st: &CStmt) -> R<()> {
        let lv: Vec<usize> = st
            .vars
            .iter()
            .copied()
            .filter(|&v| !self.fused[v])
            .collect();
        let red = has_reduce(&st.value);
        if red && self.try_dot(st, &lv)? {
            return Ok(());
        }
        if red && self.tiny_map_rows(st, &lv)? {
            return Ok(());
        }
        if let Some(j) = self.lane_var(st, &lv, red) {
            return self.lanes(st, &lv, j, red);
        }
        if let Some(i) = red.then(|| self.stream_rows_var(st, &lv)).flatten() {
            return self.stream_rows(st, &lv, i);
        }
        // Scalar points (reductions may still vectorise along their own variable).
        let cx = Cx {
            lane: None,
            groups: vec![Group {
                over: vec![],
                lane_base: None,
                mask: None,
                slot: 0,
                row: 0,
            }],
        };
        self.point_loops(&lv, &mut |k| {
            k.memo.clear();
            let v = k.eval(&st.value, &cx)?;
            k.store(st, v, st.value.dtype, &cx);
            Ok(())
        })
    }

    /// The variable of `lv` whose points statement `st` computes as vector lanes, if any.
    fn lane_var(&self, st: &CStmt, lv: &[usize], red: bool) -> Option<usize> {
        let inst = self.inst;
        let tgt = self.target_lin(st);
        // The lane variable: smallest target stride among the non-trivial dims.
        let mut lane: Option<(i64, usize)> = None;
        for &v in lv {
            if inst.extent(v) <= 1 {
                continue;
            }
            let s = tgt.coeff(v).abs();
            if lane.is_none_or(|(bs, _)| s <= bs) {
                lane = Some((s, v));
            }
        }
        let mut lane = lane.map(|l| l.1);
        if let Some(j) = lane {
            let along_red = red && self.reduce_contiguous(&st.value);
            if along_red
                && self.contiguous_loads(&st.value, j) == 0
                && !self.packs_strided(st, lv, j)
            {
                lane = None;
            }
        }
        // A reduction whose contiguous output dimension is narrower than a vector (a conv at
        // 7×7 or 14×14; for a dense conv, narrower than [`implicit::CONV_ROW_VECTORS`]
        // vectors: 28×28) is vectorised along its widest other dimension instead (output
        // channels), when that one gets register blocking with its strided loads packed.
        let w = self.g.w as i64;
        let narrow = match plan::conv_roles(st) {
            // A dense conv: every variable an output channel or a position (no group).
            Some((c, p)) if c.len() + p.len() == st.vars.len() => implicit::CONV_ROW_VECTORS * w,
            _ => w,
        };
        if let Some(j) = lane.filter(|&j| red && inst.extent(j) < narrow) {
            let wider = lv
                .iter()
                .copied()
                .filter(|&v| v != j && inst.extent(v) >= 2 * w)
                .filter(|&v| self.packs_strided(st, lv, v))
                .max_by_key(|&v| inst.extent(v));
            lane = wider.or(lane);
        }
        lane
    }

    fn lo_of(&self, v: usize) -> IntValue<'ctx> {
        if v < self.inst.parallel {
            self.lo[v]
        } else {
            self.g.i64c(self.inst.vars[v].range.0)
        }
    }

    fn hi_of(&self, v: usize) -> IntValue<'ctx> {
        if v < self.inst.parallel {
            self.hi[v]
        } else {
            self.g.i64c(self.inst.vars[v].range.1)
        }
    }

    /// Scalar loops over `vars` (runtime bounds), calling `f` at every point.
    fn point_loops(&mut self, vars: &[usize], f: &mut dyn FnMut(&mut Self) -> R<()>) -> R<()> {
        let Some((&v, rest)) = vars.split_first() else {
            return f(self);
        };
        let (lo, hi) = (self.lo_of(v), self.hi_of(v));
        let loops = Loops {
            g: self.g,
            f: self.loops.f,
        };
        loops.counted(self, lo, hi, 1, vec![], &mut |k, iv, _| {
            k.env[v] = Some(iv);
            k.point_loops(rest, f)?;
            Ok(vec![])
        })?;
        Ok(())
    }
}
