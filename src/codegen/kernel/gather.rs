//! Gathered loads (`E[ids[b, s], h]`): each gathered index is loaded (a scalar when it does not
//! move along the lanes, so an embedding row is one contiguous vector load per group), its
//! affine offset added, a negative coordinate wrapped once, and the coordinate checked against
//! the dimension before any address is formed. An out-of-range index calls the runtime's
//! `tapc_rt_gather_fault` with the access, the index and the bad value (the first bad lane's),
//! and the kernel returns status 2 (see `tapc_runtime::fault`).

// The kernel's state, types and imports (`super`), plus what only this file uses.
use super::*;
use crate::ir::instance::GatherLoad;

/// The runtime function a kernel calls on an out-of-range gathered index.
pub const GATHER_FAULT: &str = "tapc_rt_gather_fault";

impl<'ctx> K<'_, '_, 'ctx> {
    /// The elements of a gathered load, one value per group.
    pub(super) fn gather(&mut self, ga: &GatherLoad, d: DType, cx: &Cx<'ctx>) -> R<Vec<V<'ctx>>> {
        let g = self.g;
        let k = ga.input;
        if self.pads[k].is_some() {
            return Err("a gather from a padded view is not supported natively".into());
        }
        let bases = self.input_bases(k);
        let mut affine = ga.index.clone();
        for (dim, _) in ga.gathered() {
            affine[dim] = Affine::constant(bases[dim]);
        }
        let a = self.lin(&Src::Input(k), &affine);
        let c = cx.lane.map_or(0, |l| a.coeff(l));
        // Per group, the gathered dimensions' part of the element offset.
        let mut extra: Vec<V<'ctx>> = vec![g.i64c(0).into(); cx.groups.len()];
        for (dim, b) in ga.gathered() {
            let vals = self.eval(b, cx)?;
            for (gi, grp) in cx.groups.iter().enumerate() {
                let coord = self.coordinate(ga, dim, vals[gi], b.dtype, grp, cx.lane);
                let stride = g.i64c(self.in_strides[k][dim]).into();
                extra[gi] = g.bin(Op::Add, extra[gi], g.bin(Op::Mul, coord, stride));
            }
        }
        let ety = g.mty(d);
        let base = self.bufs[k];
        Ok(cx
            .groups
            .iter()
            .zip(extra)
            .map(|(grp, x)| {
                let off = self.offset(&a, grp, cx.lane);
                let v = if Gen::is_vec(x) {
                    let offs: V = self.lane_offsets(off, c).into();
                    let offs = g.bin(Op::Add, offs, x).into_vector_value();
                    g.gather(ety, base, offs, grp.mask)
                } else {
                    let off = g.bin(Op::Add, off.into(), x).into_int_value();
                    self.strided_load(ety, base, off, c, grp.mask)
                };
                g.widen(v, d)
            })
            .collect())
    }

    /// The checked coordinate (i64, a vector when `v` is one or the offset moves along the
    /// lanes) of gathered dimension `dim` for the loaded index `v` of dtype `vd`.
    fn coordinate(
        &mut self,
        ga: &GatherLoad,
        dim: usize,
        v: V<'ctx>,
        vd: DType,
        grp: &Group<'ctx>,
        lane: Option<usize>,
    ) -> V<'ctx> {
        let g = self.g;
        let size = self.inst.inputs[ga.input].shape[dim];
        let off = &ga.index[dim];
        let o = self.offset(off, grp, lane);
        let lc = lane.map_or(0, |l| off.coeff(l));
        let o: V = if lc == 0 {
            o.into()
        } else {
            self.lane_offsets(o, lc).into()
        };
        let x = g.bin(Op::Add, g.cast(v, vd, DType::I64), o);
        let zero = g.i64c(0).into();
        let neg = g.icmp(IntPredicate::SLT, x, zero);
        let wrapped = g.select(neg, g.bin(Op::Add, x, g.i64c(size).into()), x);
        let mut bad = g.icmp(IntPredicate::UGE, wrapped, g.i64c(size).into());
        if let (true, Some(m)) = (Gen::is_vec(bad), grp.mask) {
            bad = g.bin(Op::And, bad, m.into());
        }
        self.check_gather(ga, dim, bad, x, size);
        wrapped
    }

    /// Branches to a fault report when any lane of `bad` is set (`x`: the unwrapped
    /// coordinates, the first bad lane's is reported).
    fn check_gather(&mut self, ga: &GatherLoad, dim: usize, bad: V<'ctx>, x: V<'ctx>, size: i64) {
        let g = self.g;
        let any = if Gen::is_vec(bad) {
            g.intrinsic("llvm.vector.reduce.or", &[bad.get_type()], &[bad])
        } else {
            bad
        };
        let fault = g.cx.append_basic_block(self.loops.f, "gather_oob");
        let ok = g.cx.append_basic_block(self.loops.f, "gather_ok");
        g.b.build_conditional_branch(any.into_int_value(), fault, ok)
            .expect("positioned");
        g.b.position_at_end(fault);
        let value = if Gen::is_vec(bad) {
            // The first bad lane: the least lane number among the bad ones.
            let w = g.i64c(g.w as i64).into();
            let lanes = g.select(bad, g.iota().into(), w);
            let first = g.intrinsic("llvm.vector.reduce.umin", &[lanes.get_type()], &[lanes]);
            g.b.build_extract_element(x.into_vector_value(), first.into_int_value(), "")
                .expect("positioned")
        } else {
            x
        };
        let input = &self.inst.signature.inputs[ga.input].name;
        let what = format!("{}\n{input}\n{}", ga.text, ga.texts[dim].1);
        let text = ptr::string(g.b, &what);
        let f = ptr::gather_fault_fn(g.cx, g.m, GATHER_FAULT);
        let args = [
            text.into(),
            g.i64c(what.len() as i64).into(),
            g.i64c(dim as i64).into(),
            value,
            g.i64c(size).into(),
        ];
        g.call_void(f, &args);
        g.b.build_return(Some(&g.cx.i32_type().const_int(2, false)))
            .expect("positioned");
        g.b.position_at_end(ok);
    }
}
