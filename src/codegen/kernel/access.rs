//! Loads and stores of a kernel: affine indices through strided views (vector loads where
//! contiguous, gathers where strided, broadcasts where invariant), temporaries, packed panels,
//! and constant pads folded into bounds-masked loads.

// The kernel's state, types and imports (`super`), plus what only this file uses.
use super::*;

impl<'ctx> K<'_, '_, 'ctx> {
    /// Per dimension of input `k`: the coordinate of its buffer's element 0 (the shard origin,
    /// moved by a folded pad's low widths).
    pub(super) fn input_bases(&self, k: usize) -> Vec<i64> {
        let o = &self.inst.origins[k];
        match &self.pads[k] {
            Some(p) => o.iter().zip(&p.lo).map(|(a, b)| a + b).collect(),
            None => o.clone(),
        }
    }

    /// Which lanes of a load of padded input `k` at `index` are inside the unpadded tensor
    /// (a vector when any coordinate moves along the lane, else a scalar `i1`).
    pub(super) fn pad_mask(
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
    pub(super) fn load_padded(
        &self,
        k: usize,
        index: &[Affine],
        d: DType,
        cx: &Cx<'ctx>,
    ) -> Vec<V<'ctx>> {
        let g = self.g;
        let a = self.lin(&Src::Input(k), index);
        let ety = g.mty(d);
        let base = self.bufs[k];
        let fill = g.konst(self.pads[k].as_ref().expect("padded").fill, d);
        let Some(safe) = self.pad_safe[k] else {
            // The view lies wholly in the padding: nothing to load.
            let lanes = cx
                .lane
                .is_some_and(|l| index.iter().any(|a| a.coeff(l) != 0));
            let v = if lanes { g.splat(fill) } else { fill };
            return cx.groups.iter().map(|_| v).collect();
        };
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
                        .select(inside, off.into(), g.i64c(safe).into())
                        .into_int_value();
                    let v = ptr::load(g.b, ety, ptr::element(g.b, base, ety, safe));
                    if c == 0 {
                        v
                    } else {
                        g.splat(v)
                    }
                };
                let v = g.widen(v, d);
                g.select(inside, v, fill)
            })
            .collect()
    }

    /// The linear element offset of a load or store.
    pub(super) fn lin(&self, src: &Src, index: &[Affine]) -> Affine {
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

    pub(super) fn target_lin(&self, st: &CStmt) -> Affine {
        let index: Vec<Affine> = st.vars.iter().map(|&v| Affine::var(v)).collect();
        let bases: Vec<i64> = st.vars.iter().map(|&v| self.static_lo(v)).collect();
        match st.target {
            Target::Output(k) => linear(&index, &self.out_strides[k], &bases),
            Target::Temp(t) => linear(&index, &self.temps[t].strides, &bases),
        }
    }

    /// Variables `e`'s value depends on (free variables only).
    pub(super) fn uses(&self, e: &CExpr, out: &mut Vec<usize>) {
        match &e.kind {
            CKind::Const(_) => {}
            CKind::Var(v) => out.push(*v),
            CKind::Load { src, index, .. } => {
                out.extend(self.lin(src, index).terms.iter().map(|t| t.0))
            }
            CKind::Gather(ga) => {
                for (d, a) in ga.index.iter().enumerate() {
                    out.extend(a.terms.iter().filter(|t| t.1 != 0).map(|t| t.0));
                    if let Some(b) = &ga.by[d] {
                        self.uses(b, out);
                    }
                }
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

    pub(super) fn depends(&self, e: &CExpr, vars: &[usize]) -> bool {
        let mut u = Vec::new();
        self.uses(e, &mut u);
        u.iter().any(|v| vars.contains(v))
    }

    /// Loads in `e` whose offset moves by exactly one element along `v`.
    pub(super) fn contiguous_loads(&self, e: &CExpr, v: usize) -> usize {
        let mut n = 0;
        visit_loads(e, &mut |src, index| {
            if self.lin(&src, index).coeff(v) == 1 {
                n += 1;
            }
        });
        n
    }

    pub(super) fn loads_of(&self, e: &CExpr) -> Vec<Affine> {
        let mut out = Vec::new();
        visit_loads(e, &mut |src, index| out.push(self.lin(&src, index)));
        out
    }

    pub(super) fn var(&self, v: usize, grp: &Group<'ctx>) -> IntValue<'ctx> {
        grp.over
            .iter()
            .find(|o| o.0 == v)
            .map(|o| o.1)
            .or(self.env[v])
            .expect("every variable is bound by an enclosing loop")
    }

    /// The scalar part of `a` for a group: every term but the lane variable's, plus the
    /// lane variable's lane-0 value.
    pub(super) fn offset(
        &self,
        a: &Affine,
        grp: &Group<'ctx>,
        lane: Option<usize>,
    ) -> IntValue<'ctx> {
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

    pub(super) fn lane_offsets(&self, base: IntValue<'ctx>, stride: i64) -> VectorValue<'ctx> {
        let g = self.g;
        let steps = g.bin(Op::Mul, g.iota().into(), g.splat(g.i64c(stride).into()));
        g.bin(Op::Add, g.splat(base.into()), steps)
            .into_vector_value()
    }

    pub(super) fn load(
        &self,
        src: &Src,
        index: &[Affine],
        d: DType,
        cx: &Cx<'ctx>,
    ) -> Vec<V<'ctx>> {
        let g = self.g;
        if let Some(v) = self.tile_load(src, index, d, cx) {
            return v;
        }
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
                let v = self.strided_load(ety, base, off, c, grp.mask);
                g.widen(v, d)
            })
            .collect()
    }

    /// The element at `base[off]` (`c == 0`), or the lanes at `base[off + c·lane]`: one
    /// vector load when `c == 1`, a gather otherwise.
    pub(super) fn strided_load(
        &self,
        ety: BasicTypeEnum<'ctx>,
        base: PointerValue<'ctx>,
        off: IntValue<'ctx>,
        c: i64,
        mask: Option<VectorValue<'ctx>>,
    ) -> V<'ctx> {
        let g = self.g;
        if c == 0 {
            ptr::load(g.b, ety, ptr::element(g.b, base, ety, off))
        } else if c == 1 {
            g.vload(ety, ptr::element(g.b, base, ety, off), mask)
        } else {
            g.gather(ety, base, self.lane_offsets(off, c), mask)
        }
    }

    pub(super) fn store(&self, st: &CStmt, vals: Vec<V<'ctx>>, d: DType, cx: &Cx<'ctx>) {
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
            let v = g.narrow(v, d);
            if c == 0 {
                ptr::store(g.b, ptr::element(g.b, base, ety, off), v);
            } else if c == 1 {
                g.vstore(ptr::element(g.b, base, ety, off), v, grp.mask);
            } else {
                g.scatter(base, self.lane_offsets(off, c), v, grp.mask);
            }
        }
    }
}
