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
//!   tolerance of 1e-4 for floats).

use super::epilogue::{has_reduce, inline_epilogues};
use super::ops::{Gen, R, V};
use super::ptr;
use super::schedule::{Padding, SView};
use super::target::Host;
use crate::ir::instance::{Affine, CExpr, CKind, CStmt, Instance, Src, Target};
use crate::ir::kernel::Reduction;
use crate::ir::DType;
use crate::verify::visit_loads;
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::basic_block::BasicBlock;
use inkwell::module::Linkage;
use inkwell::types::{BasicMetadataTypeEnum, BasicTypeEnum};
use inkwell::values::InstructionOpcode as Op;
use inkwell::values::{BasicValueEnum, FunctionValue, IntValue, PointerValue, VectorValue};
use inkwell::IntPredicate;

/// Loop structure decided before code generation (also used by the scheduler).
#[derive(Clone, Debug, PartialEq)]
pub struct KernelPlan {
    /// Variables looped once around all statements, outermost first.
    pub fused: Vec<usize>,
    /// A parallel variable the task may be split along.
    pub split: Option<usize>,
    /// Chunk boundaries along `split` are multiples of this.
    pub align: i64,
}

fn ext(inst: &Instance, v: usize) -> i64 {
    inst.vars[v].range.1 - inst.vars[v].range.0
}

/// Which parallel variables can be fused/split: every statement is indexed by them and every
/// temporary is read exactly at them.
fn fusable(inst: &Instance, stmts: &[CStmt]) -> Vec<bool> {
    let np = inst.parallel;
    let mut ok: Vec<bool> = (0..np)
        .map(|v| stmts.iter().all(|s| s.vars.contains(&v)))
        .collect();
    for st in stmts {
        visit_loads(&st.value, &mut |src, index| {
            let Src::Temp(t) = src else { return };
            for (d, a) in index.iter().enumerate() {
                let w = inst.temps[t].vars[d];
                let exact = a.constant == 0
                    && a.terms
                        .iter()
                        .all(|&(v, c)| if v == w { c == 1 } else { c == 0 })
                    && a.coeff(w) == 1;
                if !exact && w < np {
                    ok[w] = false;
                }
            }
        });
    }
    ok
}

/// The variable among `vars` (a target's dims) along which `strides` is smallest.
fn lane_of(inst: &Instance, vars: &[usize], strides: &[i64]) -> Option<usize> {
    let mut best: Option<(i64, usize)> = None;
    for (d, &v) in vars.iter().enumerate() {
        if ext(inst, v) <= 1 {
            continue;
        }
        let s = strides.get(d).map_or(i64::MAX, |s| s.abs());
        if best.is_none_or(|(bs, _)| s <= bs) {
            best = Some((s, v));
        }
    }
    best.map(|b| b.1)
}

/// Decides fusion and splitting for `inst` writing `outputs`.
pub fn plan(inst: &Instance, outputs: &[SView], lanes: u32) -> KernelPlan {
    let none = KernelPlan {
        fused: vec![],
        split: None,
        align: 1,
    };
    if inst.stmts.is_none() {
        return none;
    }
    let stmts = &inline_epilogues(inst)[..];
    let ok = fusable(inst, stmts);
    let out = stmts.iter().find_map(|s| match s.target {
        Target::Output(k) => Some((s, k)),
        Target::Temp(_) => None,
    });
    let Some((out, k)) = out else { return none };
    let lane = lane_of(inst, &out.vars, &outputs[k].strides);
    let is_ok = |v: usize| v < ok.len() && ok[v];
    let fused: Vec<usize> = if stmts.len() > 1 {
        out.vars
            .iter()
            .copied()
            .filter(|&v| is_ok(v) && Some(v) != lane)
            .collect()
    } else {
        vec![]
    };
    let split = fused
        .iter()
        .copied()
        .find(|&v| ext(inst, v) >= 2)
        .or_else(|| {
            out.vars
                .iter()
                .copied()
                .find(|&v| is_ok(v) && Some(v) != lane && ext(inst, v) >= 2)
        })
        .or(lane.filter(|&l| is_ok(l) && ext(inst, l) >= 2));
    let align = if split.is_some() && split == lane {
        4 * lanes as i64
    } else {
        8
    };
    KernelPlan {
        fused,
        split,
        align,
    }
}

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

/// What one evaluation computes: `groups.len()` results, vectors along `lane`.
#[derive(Clone)]
struct Cx<'ctx> {
    lane: Option<usize>,
    groups: Vec<Group<'ctx>>,
}

/// The body of static reduction loops: current accumulators in, updated ones out.
type ReduceBody<'s, K, T> = dyn FnMut(&mut K, Vec<T>) -> R<Vec<T>> + 's;

type Body<'s, 'ctx, K> = dyn FnMut(&mut K, IntValue<'ctx>, Vec<V<'ctx>>) -> R<Vec<V<'ctx>>> + 's;

/// The body of a block of lanes: its first lane, and how many lanes are left in a partial
/// last block (`None`: a full block).
type BlockBody<'s, 'ctx, K> =
    dyn FnMut(&mut K, IntValue<'ctx>, Option<IntValue<'ctx>>) -> R<()> + 's;

/// Emits counted loops; shared by every kernel kind.
pub struct Loops<'g, 'a, 'ctx> {
    pub g: &'g Gen<'a, 'ctx>,
    pub f: FunctionValue<'ctx>,
}

impl<'ctx> Loops<'_, '_, 'ctx> {
    /// `for (iv = lo; iv < hi; iv += step)` carrying `init` around; returns the final values
    /// (`init` when the loop does not run).
    pub fn counted<K>(
        &self,
        k: &mut K,
        lo: IntValue<'ctx>,
        hi: IntValue<'ctx>,
        step: i64,
        init: Vec<V<'ctx>>,
        body: &mut Body<'_, 'ctx, K>,
    ) -> R<Vec<V<'ctx>>> {
        let g = self.g;
        let b = g.b;
        let pre = b.get_insert_block().expect("positioned");
        let header = g.cx.append_basic_block(self.f, "loop");
        let exit = g.cx.append_basic_block(self.f, "done");
        let enter = b
            .build_int_compare(IntPredicate::SLT, lo, hi, "")
            .expect("positioned");
        b.build_conditional_branch(enter, header, exit)
            .expect("positioned");
        b.position_at_end(header);
        let iv = b.build_phi(g.cx.i64_type(), "i").expect("positioned");
        iv.add_incoming(&[(&lo, pre)]);
        let phis: Vec<_> = init
            .iter()
            .map(|v| {
                let p = b.build_phi(v.get_type(), "acc").expect("positioned");
                p.add_incoming(&[(v, pre)]);
                p
            })
            .collect();
        let cur = phis.iter().map(|p| p.as_basic_value()).collect();
        let ivv = iv.as_basic_value().into_int_value();
        let vals = body(k, ivv, cur)?;
        let latch = b.get_insert_block().expect("positioned");
        let next = b.build_int_add(ivv, g.i64c(step), "").expect("positioned");
        iv.add_incoming(&[(&next, latch)]);
        for (p, v) in phis.iter().zip(&vals) {
            p.add_incoming(&[(v, latch)]);
        }
        let more = b
            .build_int_compare(IntPredicate::SLT, next, hi, "")
            .expect("positioned");
        b.build_conditional_branch(more, header, exit)
            .expect("positioned");
        b.position_at_end(exit);
        Ok(init
            .iter()
            .zip(&vals)
            .map(|(i, v)| {
                let p = b.build_phi(i.get_type(), "out").expect("positioned");
                p.add_incoming(&[(i, pre), (v, latch)]);
                p.as_basic_value()
            })
            .collect())
    }

    /// `if cond { then() }`.
    pub fn when<K>(
        &self,
        k: &mut K,
        cond: IntValue<'ctx>,
        then: &mut dyn FnMut(&mut K) -> R<()>,
    ) -> R<()> {
        let b = self.g.b;
        let yes = self.g.cx.append_basic_block(self.f, "then");
        let after = self.g.cx.append_basic_block(self.f, "after");
        b.build_conditional_branch(cond, yes, after)
            .expect("positioned");
        b.position_at_end(yes);
        then(k)?;
        b.build_unconditional_branch(after).expect("positioned");
        b.position_at_end(after);
        Ok(())
    }
}

/// Adds the exported entry `name(i8** bases, i64* range) -> i32` that loads the arguments
/// and calls `body(ptr args..., lo0, hi0, ...)`, whose pointer parameters are `noalias`.
pub fn wrap<'ctx>(
    g: &Gen<'_, 'ctx>,
    host: &Host,
    name: &str,
    arg_types: &[BasicTypeEnum<'ctx>],
    dims: usize,
) -> (FunctionValue<'ctx>, FunctionValue<'ctx>) {
    let cx = g.cx;
    let i64t = cx.i64_type();
    let mut params: Vec<BasicMetadataTypeEnum> =
        arg_types.iter().map(|&t| ptr::ptr_to(t).into()).collect();
    params.extend((0..2 * dims).map(|_| BasicMetadataTypeEnum::from(i64t)));
    let body = g.m.add_function(
        &format!("{name}.body"),
        cx.i32_type().fn_type(&params, false),
        Some(Linkage::Internal),
    );
    host.tag(cx, body);
    let noalias = Attribute::get_named_enum_kind_id("noalias");
    let noinline = Attribute::get_named_enum_kind_id("noinline");
    for k in 0..arg_types.len() {
        body.add_attribute(
            AttributeLoc::Param(k as u32),
            cx.create_enum_attribute(noalias, 0),
        );
    }
    body.add_attribute(
        AttributeLoc::Function,
        cx.create_enum_attribute(noinline, 0),
    );
    let bp = ptr::byte_ptr(cx);
    let entry_ty = cx.i32_type().fn_type(
        &[
            ptr::ptr_to(bp.into()).into(),
            ptr::ptr_to(i64t.into()).into(),
        ],
        false,
    );
    let entry = g.m.add_function(name, entry_ty, None);
    host.tag(cx, entry);
    let bb = cx.append_basic_block(entry, "entry");
    g.b.position_at_end(bb);
    let bases = entry.get_nth_param(0).expect("param").into_pointer_value();
    let range = entry.get_nth_param(1).expect("param").into_pointer_value();
    let mut args: Vec<V> = Vec::new();
    for (k, &t) in arg_types.iter().enumerate() {
        let slot = ptr::element(g.b, bases, bp.into(), g.i64c(k as i64));
        let p = ptr::load(g.b, bp.into(), slot).into_pointer_value();
        args.push(ptr::cast(g.b, p, t).into());
    }
    for d in 0..2 * dims {
        let slot = ptr::element(g.b, range, i64t.into(), g.i64c(d as i64));
        args.push(ptr::load(g.b, i64t.into(), slot));
    }
    let r = g.call(body, &args);
    g.b.build_return(Some(&r)).expect("positioned");
    let bb = cx.append_basic_block(body, "entry");
    g.b.position_at_end(bb);
    (entry, body)
}

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
    let stmts = &inline_epilogues(inst)[..];
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
fn linear(index: &[Affine], strides: &[i64], bases: &[i64]) -> Affine {
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
        let g = self.g;
        let (malloc, _) = ptr::libc_alloc(g.cx, g.m);
        let p = g.call(malloc, &[g.i64c(bytes).into()]).into_pointer_value();
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
                        ext(self.inst, v).max(1)
                    }
                })
                .collect();
            let mut strides = super::schedule::row_major(&dims);
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

    /// Per dimension of input `k`: the coordinate of its buffer's element 0 (the shard origin,
    /// moved by a folded pad's low widths).
    fn input_bases(&self, k: usize) -> Vec<i64> {
        let o = &self.inst.origins[k];
        match &self.pads[k] {
            Some(p) => o.iter().zip(&p.lo).map(|(a, b)| a + b).collect(),
            None => o.clone(),
        }
    }

    /// Which lanes of a load of padded input `k` at `index` are inside the unpadded tensor
    /// (a vector when any coordinate moves along the lane, else a scalar `i1`).
    fn pad_mask(
        &self,
        k: usize,
        index: &[Affine],
        grp: &Group<'ctx>,
        lane: Option<usize>,
    ) -> V<'ctx> {
        let g = self.g;
        let p = self.pads[k].as_ref().expect("a padded input");
        let bases = self.input_bases(k);
        let mut mask: V = g.cx.bool_type().const_int(1, false).into();
        for (d, a) in index.iter().enumerate() {
            let coord = Affine {
                terms: a.terms.clone(),
                constant: a.constant - bases[d],
            };
            let c = lane.map_or(0, |l| coord.coeff(l));
            let x0 = self.offset(&coord, grp, lane);
            let x: V = if c == 0 {
                x0.into()
            } else {
                self.lane_offsets(x0, c).into()
            };
            let inside = g.icmp(IntPredicate::ULT, x, g.i64c(p.inner[d]).into());
            mask = g.bin(Op::And, mask, inside);
        }
        mask
    }

    /// A load of input `k` through a folded pad: masked (or address-clamped when scalar) so
    /// only in-bounds elements are read, with `fill` elsewhere.
    fn load_padded(&self, k: usize, index: &[Affine], d: DType, cx: &Cx<'ctx>) -> Vec<V<'ctx>> {
        let g = self.g;
        let a = self.lin(&Src::Input(k), index);
        let ety = g.mty(d);
        let base = self.bufs[k];
        let fill = g.konst(self.pads[k].as_ref().expect("padded").fill, d);
        let c = cx.lane.map_or(0, |l| a.coeff(l));
        cx.groups
            .iter()
            .map(|grp| {
                let off = self.offset(&a, grp, cx.lane);
                let inside = self.pad_mask(k, index, grp, cx.lane);
                let v = if Gen::is_vec(inside) {
                    let m = match grp.mask {
                        Some(t) => g.bin(Op::And, inside, t.into()),
                        None => inside,
                    }
                    .into_vector_value();
                    if c == 1 {
                        g.vload(ety, ptr::element(g.b, base, ety, off), Some(m))
                    } else {
                        g.gather(ety, base, self.lane_offsets(off, c), Some(m))
                    }
                } else {
                    let safe = g
                        .select(inside, off.into(), g.i64c(0).into())
                        .into_int_value();
                    let v = ptr::load(g.b, ety, ptr::element(g.b, base, ety, safe));
                    if c == 0 {
                        v
                    } else {
                        g.splat(v)
                    }
                };
                let v = if d == DType::Bool {
                    let z = g.splat(g.cx.i8_type().const_zero().into());
                    let z = if Gen::is_vec(v) {
                        z
                    } else {
                        g.cx.i8_type().const_zero().into()
                    };
                    g.icmp(IntPredicate::NE, v, z)
                } else {
                    v
                };
                g.select(inside, v, fill)
            })
            .collect()
    }

    /// The linear element offset of a load or store.
    fn lin(&self, src: &Src, index: &[Affine]) -> Affine {
        match src {
            Src::Input(k) => linear(index, &self.in_strides[*k], &self.input_bases(*k)),
            Src::Temp(t) => {
                let bases: Vec<i64> = self.inst.temps[*t]
                    .vars
                    .iter()
                    .map(|&v| self.static_lo(v))
                    .collect();
                linear(index, &self.temps[*t].strides, &bases)
            }
        }
    }

    fn target_lin(&self, st: &CStmt) -> Affine {
        let index: Vec<Affine> = st.vars.iter().map(|&v| Affine::var(v)).collect();
        let bases: Vec<i64> = st.vars.iter().map(|&v| self.static_lo(v)).collect();
        match st.target {
            Target::Output(k) => linear(&index, &self.out_strides[k], &bases),
            Target::Temp(t) => linear(&index, &self.temps[t].strides, &bases),
        }
    }

    /// Variables `e`'s value depends on (free variables only).
    fn uses(&self, e: &CExpr, out: &mut Vec<usize>) {
        match &e.kind {
            CKind::Const(_) => {}
            CKind::Var(v) => out.push(*v),
            CKind::Load { src, index, .. } => {
                out.extend(self.lin(src, index).terms.iter().map(|t| t.0))
            }
            CKind::Reduce { vars, body, .. } => {
                let mut inner = Vec::new();
                self.uses(body, &mut inner);
                out.extend(inner.into_iter().filter(|v| !vars.contains(v)));
            }
            CKind::Call(_, args) => args.iter().for_each(|a| self.uses(a, out)),
            CKind::Unary(_, a) => self.uses(a, out),
            CKind::Binary(_, a, b) => {
                self.uses(a, out);
                self.uses(b, out);
            }
        }
    }

    fn depends(&self, e: &CExpr, vars: &[usize]) -> bool {
        let mut u = Vec::new();
        self.uses(e, &mut u);
        u.iter().any(|v| vars.contains(v))
    }

    /// Loads in `e` whose offset moves by exactly one element along `v`.
    fn contiguous_loads(&self, e: &CExpr, v: usize) -> usize {
        let mut n = 0;
        visit_loads(e, &mut |src, index| {
            if self.lin(&src, index).coeff(v) == 1 {
                n += 1;
            }
        });
        n
    }

    fn loads_of(&self, e: &CExpr) -> Vec<Affine> {
        let mut out = Vec::new();
        visit_loads(e, &mut |src, index| out.push(self.lin(&src, index)));
        out
    }

    fn var(&self, v: usize, grp: &Group<'ctx>) -> IntValue<'ctx> {
        grp.over
            .iter()
            .find(|o| o.0 == v)
            .map(|o| o.1)
            .or(self.env[v])
            .expect("every variable is bound by an enclosing loop")
    }

    /// The scalar part of `a` for a group: every term but the lane variable's, plus the
    /// lane variable's lane-0 value.
    fn offset(&self, a: &Affine, grp: &Group<'ctx>, lane: Option<usize>) -> IntValue<'ctx> {
        let g = self.g;
        let mut acc = g.i64c(a.constant);
        for &(v, c) in &a.terms {
            let x = match (Some(v) == lane, grp.lane_base) {
                (true, Some(b)) => b,
                _ => self.var(v, grp),
            };
            let t = g.b.build_int_mul(x, g.i64c(c), "").expect("positioned");
            acc = g.b.build_int_add(acc, t, "").expect("positioned");
        }
        acc
    }

    fn lane_offsets(&self, base: IntValue<'ctx>, stride: i64) -> VectorValue<'ctx> {
        let g = self.g;
        let steps = g.bin(Op::Mul, g.iota().into(), g.splat(g.i64c(stride).into()));
        g.bin(Op::Add, g.splat(base.into()), steps)
            .into_vector_value()
    }

    fn load(&self, src: &Src, index: &[Affine], d: DType, cx: &Cx<'ctx>) -> Vec<V<'ctx>> {
        let g = self.g;
        if let Some(p) = self
            .packed
            .iter()
            .find(|p| p.src == *src && p.index == index)
        {
            let ety = g.mty(d);
            let row = self.packed_row(p);
            return cx
                .groups
                .iter()
                .map(|grp| {
                    let off =
                        g.b.build_int_add(row, g.i64c(grp.slot * g.w as i64), "")
                            .expect("positioned");
                    g.vload(ety, ptr::element(g.b, p.ptr, ety, off), None)
                })
                .collect();
        }
        if let Src::Input(k) = src {
            if self.pads[*k].is_some() {
                return self.load_padded(*k, index, d, cx);
            }
        }
        let a = self.lin(src, index);
        let (base, ety) = match src {
            Src::Input(k) => (self.bufs[*k], g.mty(d)),
            Src::Temp(t) => (self.temps[*t].ptr, g.mty(d)),
        };
        let c = cx.lane.map_or(0, |l| a.coeff(l));
        cx.groups
            .iter()
            .map(|grp| {
                let off = self.offset(&a, grp, cx.lane);
                let v = if c == 0 {
                    ptr::load(g.b, ety, ptr::element(g.b, base, ety, off))
                } else if c == 1 {
                    g.vload(ety, ptr::element(g.b, base, ety, off), grp.mask)
                } else {
                    g.gather(ety, base, self.lane_offsets(off, c), grp.mask)
                };
                if d == DType::Bool {
                    let z = if Gen::is_vec(v) {
                        g.splat(g.cx.i8_type().const_zero().into())
                    } else {
                        g.cx.i8_type().const_zero().into()
                    };
                    g.icmp(IntPredicate::NE, v, z)
                } else {
                    v
                }
            })
            .collect()
    }

    fn store(&self, st: &CStmt, vals: Vec<V<'ctx>>, d: DType, cx: &Cx<'ctx>) {
        let g = self.g;
        let a = self.target_lin(st);
        let (base, ety) = match st.target {
            Target::Output(k) => (self.bufs[self.inst.inputs.len() + k], g.mty(d)),
            Target::Temp(t) => (self.temps[t].ptr, g.mty(d)),
        };
        let c = cx.lane.map_or(0, |l| a.coeff(l));
        for (grp, v) in cx.groups.iter().zip(vals) {
            let off = self.offset(&a, grp, cx.lane);
            let v = if c != 0 { g.splat(v) } else { v };
            let v = if d == DType::Bool {
                g.cast_to(Op::ZExt, v, g.cx.i8_type().into())
            } else {
                v
            };
            if c == 0 {
                ptr::store(g.b, ptr::element(g.b, base, ety, off), v);
            } else if c == 1 {
                g.vstore(ptr::element(g.b, base, ety, off), v, grp.mask);
            } else {
                g.scatter(base, self.lane_offsets(off, c), v, grp.mask);
            }
        }
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

    fn reduce(
        &mut self,
        kind: Reduction,
        vars: &[usize],
        body: &CExpr,
        d: DType,
        cx: &Cx<'ctx>,
    ) -> R<Vec<V<'ctx>>> {
        let g = self.g;
        if let (None, [_], Some(&r)) = (cx.lane, cx.groups.as_slice(), vars.last()) {
            if ext(self.inst, r) >= 4 && self.contiguous_loads(body, r) > 0 && d != DType::Bool {
                return self.reduce_along(kind, vars, r, body, d, cx);
            }
        }
        let vec = cx.lane.is_some_and(|l| self.depends(body, &[l]));
        let id = g.identity(kind, d)?;
        let init = vec![if vec { g.splat(id) } else { id }; cx.groups.len()];
        let cx = cx.clone();
        self.reduce_loops(vars, init, &mut |k, acc| {
            k.accumulate(kind, body, d, &acc, &cx)
        })
    }

    /// Evaluates `body` for `cx` and combines it into `acc` (one per group); unless
    /// `--fp-contract=off`, a float `sum` of a product is a fused multiply-add.
    fn accumulate(
        &mut self,
        kind: Reduction,
        body: &CExpr,
        d: DType,
        acc: &[V<'ctx>],
        cx: &Cx<'ctx>,
    ) -> R<Vec<V<'ctx>>> {
        if self.g.contract && kind == Reduction::Sum && d.is_float() {
            if let CKind::Binary(crate::ir::kernel::BinOp::Mul, x, y) = &body.kind {
                let xs = self.eval(x, cx)?;
                let ys = self.eval(y, cx)?;
                return Ok(acc
                    .iter()
                    .zip(xs)
                    .zip(ys)
                    .map(|((&a, x), y)| self.g.mul_add(x, y, a))
                    .collect());
            }
        }
        let x = self.eval(body, cx)?;
        acc.iter()
            .zip(x)
            .map(|(&a, x)| self.g.combine(kind, a, x, d))
            .collect()
    }

    /// Static loops over reduction variables carrying `init`.
    fn reduce_loops(
        &mut self,
        vars: &[usize],
        init: Vec<V<'ctx>>,
        body: &mut ReduceBody<'_, Self, V<'ctx>>,
    ) -> R<Vec<V<'ctx>>> {
        let Some((&v, rest)) = vars.split_first() else {
            return body(self, init);
        };
        let (lo, hi) = self.inst.vars[v].range;
        let loops = Loops {
            g: self.g,
            f: self.loops.f,
        };
        let (lo, hi) = (self.g.i64c(lo), self.g.i64c(hi));
        loops.counted(self, lo, hi, 1, init, &mut |k, iv, acc| {
            k.env[v] = Some(iv);
            k.reduce_loops(rest, acc, body)
        })
    }

    /// A reduction vectorised along its innermost variable `r` (see the module docs).
    fn reduce_along(
        &mut self,
        kind: Reduction,
        vars: &[usize],
        r: usize,
        body: &CExpr,
        d: DType,
        cx: &Cx<'ctx>,
    ) -> R<Vec<V<'ctx>>> {
        let g = self.g;
        let w = g.w as i64;
        let (lo, hi) = self.inst.vars[r].range;
        let n = hi - lo;
        let u = if n >= 4 * w {
            4
        } else if n >= 2 * w {
            2
        } else {
            1
        };
        let full_end = lo + n / (u * w) * (u * w);
        let id = g.splat(g.identity(kind, d)?);
        let parent = cx.groups[0].clone();
        let outer = &vars[..vars.len() - 1];
        let accs = self.reduce_loops(outer, vec![id; u as usize], &mut |k, acc| {
            let g = k.g;
            let loops = Loops { g, f: k.loops.f };
            let mut acc = acc;
            if full_end > lo {
                let parent = parent.clone();
                acc = loops.counted(
                    k,
                    g.i64c(lo),
                    g.i64c(full_end),
                    u * w,
                    acc,
                    &mut |k, r0, acc| {
                        let groups = (0..u)
                            .map(|j| Group {
                                lane_base: Some(
                                    k.g.b
                                        .build_int_add(r0, k.g.i64c(j * w), "")
                                        .expect("positioned"),
                                ),
                                mask: None,
                                slot: j,
                                ..parent.clone()
                            })
                            .collect();
                        let cx = Cx {
                            lane: Some(r),
                            groups,
                        };
                        k.accumulate(kind, body, d, &acc, &cx)
                    },
                )?;
            }
            let rem = hi - full_end;
            if rem > 0 {
                let ut = (rem + w - 1) / w;
                let groups: Vec<Group> = (0..ut)
                    .map(|j| {
                        let bits: Vec<IntValue> = (0..w)
                            .map(|l| {
                                g.cx.bool_type()
                                    .const_int(u64::from(j * w + l < rem), false)
                            })
                            .collect();
                        Group {
                            lane_base: Some(g.i64c(full_end + j * w)),
                            mask: Some(inkwell::types::VectorType::const_vector(&bits)),
                            slot: j,
                            ..parent.clone()
                        }
                    })
                    .collect();
                let cx = Cx {
                    lane: Some(r),
                    groups: groups.clone(),
                };
                let c = k.accumulate(kind, body, d, &acc[..groups.len()], &cx)?;
                for (j, (grp, c)) in groups.iter().zip(c).enumerate() {
                    acc[j] = k.g.select(grp.mask.expect("tail mask").into(), c, acc[j]);
                }
            }
            Ok(acc)
        })?;
        let mut v = accs[0];
        for a in &accs[1..] {
            v = g.combine(kind, v, *a, d)?;
        }
        Ok(vec![g.hreduce(kind, v, d)?])
    }

    fn stmt(&mut self, st: &CStmt) -> R<()> {
        let inst = self.inst;
        let lv: Vec<usize> = st
            .vars
            .iter()
            .copied()
            .filter(|&v| !self.fused[v])
            .collect();
        let tgt = self.target_lin(st);
        let red = has_reduce(&st.value);
        // The lane variable: smallest target stride among the non-trivial dims.
        let mut lane: Option<(i64, usize)> = None;
        for &v in &lv {
            if ext(inst, v) <= 1 {
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
                && !self.packs_strided(st, &lv, j)
            {
                lane = None;
            }
        }
        let Some(j) = lane else {
            // Scalar points (reductions may still vectorise along their own variable).
            let cx = Cx {
                lane: None,
                groups: vec![Group {
                    over: vec![],
                    lane_base: None,
                    mask: None,
                    slot: 0,
                }],
            };
            return self.point_loops(&lv, &mut |k| {
                k.memo.clear();
                let v = k.eval(&st.value, &cx)?;
                k.store(st, v, st.value.dtype, &cx);
                Ok(())
            });
        };
        let w = self.g.w as i64;
        let ej = ext(inst, j);
        let (u, block) = if red {
            let u = ((ej + w - 1) / w).clamp(1, 4);
            (u, self.block_var(st, &lv, j, u))
        } else {
            (if ej >= 2 * w { 2 } else { 1 }, None)
        };
        let rows = block.map_or(1, |i| (16 / u).clamp(1, 8).min(ext(inst, i)));
        let outer: Vec<usize> = lv
            .iter()
            .copied()
            .filter(|&v| v != j && Some(v) != block)
            .collect();
        self.point_loops(&outer, &mut |k| match block {
            None => k.row_block(st, j, u, &[], None),
            Some(i) => k.panels(st, j, u, i, rows),
        })
    }

    /// A register-blocked statement: the lane variable `j` in panels of `u` vectors
    /// (outermost, so a panel of the reused operand stays in cache), and for each panel every
    /// value of the block variable `i`, `rows` at a time.
    ///
    /// Operands of the reduction that vary along `j` but not along `i` (matmul's `b[k, j]`)
    /// are *packed*: for each panel they are first copied into a contiguous buffer of
    /// `reduction points × panel width` elements, so the inner loop streams them
    /// sequentially instead of striding across rows (which thrashes cache sets and TLBs).
    fn panels(&mut self, st: &CStmt, j: usize, u: i64, i: usize, rows: i64) -> R<()> {
        let g = self.g;
        let (lo, hi) = (self.lo_of(j), self.hi_of(j));
        let jb = u * g.w as i64;
        let packs = if rows > 1 {
            self.pack_candidates(&st.value, j, i)
        } else {
            vec![]
        };
        let mut bufs = Vec::new();
        for (_, _, rvars, d) in &packs {
            let points: i64 = rvars.iter().map(|&v| ext(self.inst, v)).product();
            let bytes = points * jb * d.size_bytes() as i64;
            let p = self.malloc_or_fail(bytes);
            bufs.push(ptr::cast(g.b, p, g.mty(*d)));
        }
        let packs: Vec<Packed> = packs
            .into_iter()
            .zip(&bufs)
            .map(|((src, index, rvars, dtype), &ptr)| Packed {
                src,
                index,
                rvars,
                ptr,
                width: jb,
                dtype,
            })
            .collect();
        self.lane_blocks(lo, hi, jb, &mut |k, j0, rem| {
            k.pack(&packs, j, u, j0, rem)?;
            k.rows_at(st, j, u, i, rows, j0, rem)?;
            k.packed.clear();
            Ok(())
        })?;
        for p in bufs {
            self.free(p);
        }
        Ok(())
    }

    /// The lane variable from `lo` to `hi` in blocks of `jb` lanes: `f(block start, None)`
    /// for every full block, then `f(start, Some(lanes left))` for a partial last block.
    fn lane_blocks(
        &mut self,
        lo: IntValue<'ctx>,
        hi: IntValue<'ctx>,
        jb: i64,
        f: &mut BlockBody<'_, 'ctx, Self>,
    ) -> R<()> {
        let g = self.g;
        let full = self.round_down(lo, hi, jb);
        let loops = Loops { g, f: self.loops.f };
        loops.counted(self, lo, full, jb, vec![], &mut |k, j0, _| {
            f(k, j0, None)?;
            Ok(vec![])
        })?;
        let tail =
            g.b.build_int_compare(IntPredicate::SLT, full, hi, "")
                .expect("positioned");
        loops.when(self, tail, &mut |k| {
            let rem = k.g.b.build_int_sub(hi, full, "").expect("positioned");
            f(k, full, Some(rem))
        })
    }

    /// `u` groups of vector lanes starting at `j0`, `j0 + w`, ... (`slot` 0 to `u - 1`),
    /// masked to the first `rem` lanes when given; `over` binds the other varying variables.
    fn lane_groups(
        &self,
        over: &[(usize, IntValue<'ctx>)],
        u: i64,
        j0: IntValue<'ctx>,
        rem: Option<IntValue<'ctx>>,
    ) -> Vec<Group<'ctx>> {
        let g = self.g;
        let w = g.w as i64;
        (0..u)
            .map(|s| Group {
                over: over.to_vec(),
                lane_base: Some(
                    g.b.build_int_add(j0, g.i64c(s * w), "")
                        .expect("positioned"),
                ),
                mask: rem.map(|rem| {
                    let idx = g.bin(Op::Add, g.iota().into(), g.splat(g.i64c(s * w).into()));
                    g.icmp(IntPredicate::SLT, idx, g.splat(rem.into()))
                        .into_vector_value()
                }),
                slot: s,
            })
            .collect()
    }

    /// The element offset, in packed panel `p`, of the row for the current reduction point
    /// (its variables are bound by the enclosing loops).
    fn packed_row(&self, p: &Packed<'ctx>) -> IntValue<'ctx> {
        let g = self.g;
        let mut flat = g.i64c(0);
        for &v in &p.rvars {
            let (lo, hi) = self.inst.vars[v].range;
            let x = self.env[v].expect("reduction variables are bound");
            let x = g.b.build_int_sub(x, g.i64c(lo), "").expect("positioned");
            let f =
                g.b.build_int_mul(flat, g.i64c(hi - lo), "")
                    .expect("positioned");
            flat = g.b.build_int_add(f, x, "").expect("positioned");
        }
        g.b.build_int_mul(flat, g.i64c(p.width), "")
            .expect("positioned")
    }

    /// Loads worth packing: in a top-level reduction, varying along `j` (contiguous, or
    /// strided: a transposed operand, gathered once into the panel), independent of `i`,
    /// moving with the reduction (so the panel is reused by every value of `i`).
    #[allow(clippy::type_complexity)]
    fn pack_candidates(
        &self,
        e: &CExpr,
        j: usize,
        i: usize,
    ) -> Vec<(Src, Vec<Affine>, Vec<usize>, DType)> {
        let mut out: Vec<(Src, Vec<Affine>, Vec<usize>, DType)> = Vec::new();
        let mut stack = vec![e];
        while let Some(e) = stack.pop() {
            match &e.kind {
                CKind::Reduce { vars, body, .. } => {
                    let points: i64 = vars.iter().map(|&v| ext(self.inst, v)).product();
                    if points * 4 * self.g.w as i64 * 8 > 16 << 20 {
                        continue;
                    }
                    let mut inner = vec![&**body];
                    while let Some(b) = inner.pop() {
                        match &b.kind {
                            CKind::Load { src, index, .. } => {
                                let a = self.lin(src, index);
                                let ok = a.coeff(j) != 0
                                    && a.coeff(i) == 0
                                    && vars.iter().any(|&v| a.coeff(v) != 0)
                                    && b.dtype != DType::Bool
                                    && !out.iter().any(|o| o.0 == *src && o.1 == *index);
                                if ok {
                                    out.push((src.clone(), index.clone(), vars.clone(), b.dtype));
                                }
                            }
                            CKind::Reduce { .. } => {}
                            CKind::Call(_, a) => inner.extend(a.iter()),
                            CKind::Unary(_, a) => inner.push(a),
                            CKind::Binary(_, a, c) => {
                                inner.push(a);
                                inner.push(c);
                            }
                            CKind::Const(_) | CKind::Var(_) => {}
                        }
                    }
                }
                CKind::Call(_, a) => stack.extend(a.iter()),
                CKind::Unary(_, a) => stack.push(a),
                CKind::Binary(_, a, c) => {
                    stack.push(a);
                    stack.push(c);
                }
                CKind::Const(_) | CKind::Var(_) | CKind::Load { .. } => {}
            }
        }
        out
    }

    /// Copies the panel starting at `j0` of every packed operand, then makes them current.
    fn pack(
        &mut self,
        packs: &[Packed<'ctx>],
        j: usize,
        u: i64,
        j0: IntValue<'ctx>,
        rem: Option<IntValue<'ctx>>,
    ) -> R<()> {
        self.packed.clear();
        let w = self.g.w as i64;
        for p in packs {
            let rvars = p.rvars.clone();
            self.reduce_loops(&rvars, vec![], &mut |k, _| {
                let g = k.g;
                let groups = k.lane_groups(&[], u, j0, rem);
                let dt = p.dtype;
                let vals = k.load(
                    &p.src,
                    &p.index,
                    dt,
                    &Cx {
                        lane: Some(j),
                        groups,
                    },
                );
                let row = k.packed_row(p);
                let ety = g.mty(dt);
                for (s, v) in vals.into_iter().enumerate() {
                    let off =
                        g.b.build_int_add(row, g.i64c(s as i64 * w), "")
                            .expect("positioned");
                    g.vstore(ptr::element(g.b, p.ptr, ety, off), g.splat(v), None);
                }
                Ok(vec![])
            })?;
        }
        self.packed = packs.to_vec();
        Ok(())
    }

    /// `lo + (hi - lo) / step * step`.
    fn round_down(&self, lo: IntValue<'ctx>, hi: IntValue<'ctx>, step: i64) -> IntValue<'ctx> {
        let b = self.g.b;
        let n = b.build_int_sub(hi, lo, "").expect("positioned");
        let nb = b
            .build_int_signed_div(n, self.g.i64c(step), "")
            .expect("positioned");
        let span = b
            .build_int_mul(nb, self.g.i64c(step), "")
            .expect("positioned");
        b.build_int_add(lo, span, "").expect("positioned")
    }

    /// Every value of `i`, `rows` at a time, for the panel starting at `j0`.
    #[allow(clippy::too_many_arguments)]
    fn rows_at(
        &mut self,
        st: &CStmt,
        j: usize,
        u: i64,
        i: usize,
        rows: i64,
        j0: IntValue<'ctx>,
        rem: Option<IntValue<'ctx>>,
    ) -> R<()> {
        let g = self.g;
        let (lo, hi) = (self.lo_of(i), self.hi_of(i));
        let loops = Loops { g, f: self.loops.f };
        let mut start = lo;
        if rows > 1 {
            let full = self.round_down(lo, hi, rows);
            loops.counted(self, lo, full, rows, vec![], &mut |k, i0, _| {
                let vals: Vec<IntValue> = (0..rows)
                    .map(|r| {
                        k.g.b
                            .build_int_add(i0, k.g.i64c(r), "")
                            .expect("positioned")
                    })
                    .collect();
                k.lane_group(st, j, u, &vals, Some(i), j0, rem)?;
                Ok(vec![])
            })?;
            start = full;
        }
        loops.counted(self, start, hi, 1, vec![], &mut |k, iv, _| {
            k.lane_group(st, j, u, &[iv], Some(i), j0, rem)?;
            Ok(vec![])
        })?;
        Ok(())
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

    /// Whether some reduction in `e` has a contiguous load along its innermost variable.
    fn reduce_contiguous(&self, e: &CExpr) -> bool {
        match &e.kind {
            CKind::Reduce { vars, body, .. } => {
                vars.last()
                    .is_some_and(|&r| self.contiguous_loads(body, r) > 0)
                    || self.reduce_contiguous(body)
            }
            CKind::Call(_, a) => a.iter().any(|x| self.reduce_contiguous(x)),
            CKind::Unary(_, a) => self.reduce_contiguous(a),
            CKind::Binary(_, a, b) => self.reduce_contiguous(a) || self.reduce_contiguous(b),
            _ => false,
        }
    }

    /// Whether lanes along `j` get register blocking with every load that strides along `j`
    /// packed (A·Bᵀ through a transposed view): then vectorising along `j` beats a dot
    /// product per point along the contiguous reduction.
    fn packs_strided(&self, st: &CStmt, lv: &[usize], j: usize) -> bool {
        let w = self.g.w as i64;
        let u = ((ext(self.inst, j) + w - 1) / w).clamp(1, 4);
        let Some(i) = self.block_var(st, lv, j, u) else {
            return false;
        };
        if (16 / u).clamp(1, 8).min(ext(self.inst, i)) < 2 {
            return false;
        }
        let packs = self.pack_candidates(&st.value, j, i);
        let mut all = !packs.is_empty();
        visit_loads(&st.value, &mut |src, index| {
            let c = self.lin(&src, index).coeff(j);
            if c != 0 && c != 1 && !packs.iter().any(|p| p.0 == src && p.1 == index) {
                all = false;
            }
        });
        all
    }

    /// The variable to block rows over: the one whose blocking reuses loads best (loads not
    /// depending on it are shared by every row of the block).
    fn block_var(&self, st: &CStmt, lv: &[usize], j: usize, u: i64) -> Option<usize> {
        let loads = self.loads_of(&st.value);
        let mut best: Option<(i64, usize)> = None;
        for &v in lv {
            if v == j || ext(self.inst, v) < 2 {
                continue;
            }
            if loads.iter().all(|a| a.coeff(v) != 0) {
                continue; // nothing to reuse
            }
            let cost: i64 = loads
                .iter()
                .filter(|a| a.coeff(v) != 0)
                .map(|a| match a.coeff(j) {
                    0 => 1,
                    1 => u,
                    _ => 4 * u, // a gather per row (packed instead when another var is blocked)
                })
                .sum();
            if best.is_none_or(|(c, _)| cost <= c) {
                best = Some((cost, v));
            }
        }
        best.map(|b| b.1)
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

    /// One row block: `rows` values of the block variable `i`, the lane variable `j` in
    /// steps of `u` vectors, then a masked tail.
    fn row_block(
        &mut self,
        st: &CStmt,
        j: usize,
        u: i64,
        rows: &[IntValue<'ctx>],
        i: Option<usize>,
    ) -> R<()> {
        let (lo, hi) = (self.lo_of(j), self.hi_of(j));
        let jb = u * self.g.w as i64;
        let rows = rows.to_vec();
        self.lane_blocks(lo, hi, jb, &mut |k, j0, rem| {
            k.lane_group(st, j, u, &rows, i, j0, rem)
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn lane_group(
        &mut self,
        st: &CStmt,
        j: usize,
        u: i64,
        rows: &[IntValue<'ctx>],
        i: Option<usize>,
        j0: IntValue<'ctx>,
        rem: Option<IntValue<'ctx>>,
    ) -> R<()> {
        let row_over: Vec<Vec<(usize, IntValue)>> = match i {
            Some(i) => rows.iter().map(|&r| vec![(i, r)]).collect(),
            None => vec![vec![]],
        };
        let groups = row_over
            .iter()
            .flat_map(|over| self.lane_groups(over, u, j0, rem))
            .collect();
        let cx = Cx {
            lane: Some(j),
            groups,
        };
        self.memo.clear();
        let vals = self.eval(&st.value, &cx)?;
        self.store(st, vals, st.value.dtype, &cx);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linearizes_with_origins_and_strides() {
        // x[i + 1, 2 * j] in a view with strides [10, -1] whose element 0 is at (1, 0).
        let idx = vec![
            Affine {
                terms: vec![(0, 1)],
                constant: 1,
            },
            Affine {
                terms: vec![(1, 2)],
                constant: 0,
            },
        ];
        let a = linear(&idx, &[10, -1], &[1, 0]);
        assert_eq!(a.coeff(0), 10);
        assert_eq!(a.coeff(1), -2);
        assert_eq!(a.constant, 0);
    }
}
