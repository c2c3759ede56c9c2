//! Reductions in registers: in index order per output point (one fused multiply-add per
//! step for a float sum of products unless `--fp-contract=off`), or vectorised along a
//! contiguous reduction variable with partial sums (the documented reassociation).

// The kernel's state, types and imports (`super`), plus what only this file uses.
use super::*;

/// Vectors of lanes a vectorised `argmax`/`argmin` keeps (best values and their indices).
const ARG_LANES: i64 = 4;

/// Rows of scalar reductions along a contiguous variable evaluated together (a matrix ×
/// vector's rows: independent read streams sharing the vector's loads).
const ROW_STREAMS: i64 = 4;

/// One group per parent (a row) and vector `j < u` along `r`: its first lane and mask.
fn along_groups<'ctx>(
    parents: &[Group<'ctx>],
    r: usize,
    u: i64,
    mut at: impl FnMut(i64) -> (IntValue<'ctx>, Option<VectorValue<'ctx>>),
) -> Cx<'ctx> {
    let lanes: Vec<_> = (0..u).map(&mut at).collect();
    let groups = parents
        .iter()
        .flat_map(|p| {
            lanes.iter().enumerate().map(|(j, &(base, mask))| Group {
                lane_base: Some(base),
                mask,
                slot: j as i64,
                ..p.clone()
            })
        })
        .collect();
    Cx {
        lane: Some(r),
        groups,
    }
}

impl<'ctx> K<'_, '_, 'ctx> {
    pub(super) fn reduce(
        &mut self,
        kind: Reduction,
        vars: &[usize],
        body: &CExpr,
        d: DType,
        cx: &Cx<'ctx>,
    ) -> R<Vec<V<'ctx>>> {
        let g = self.g;
        if kind.is_arg() {
            let max = kind == Reduction::ArgMax;
            let v = vars[0];
            let w = g.w as i64;
            if cx.lane.is_none()
                && cx.groups.len() == 1
                && self.inst.extent(v) >= ARG_LANES * w
                && self.contiguous_loads(body, v) > 0
                && body.dtype != DType::Bool
            {
                return self.arg_along(max, v, body, cx);
            }
            return self.arg_reduce(max, v, body, cx);
        }
        if let Some(r) = self.tile_reduce(kind, vars, body, d, cx) {
            return r;
        }
        if let (None, Some(&r)) = (cx.lane, vars.last()) {
            if cx.groups.len() <= ROW_STREAMS as usize && self.along(vars, body, d) {
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

    /// `argmax` (`max`) or `argmin` over variable `v`, in index order, never vectorised along
    /// `v`: per group, the best value and its index, moved by `Gen::arg_takes`; the index
    /// starts at `v`'s first value (the result of an empty reduction).
    fn arg_reduce(&mut self, max: bool, v: usize, body: &CExpr, cx: &Cx<'ctx>) -> R<Vec<V<'ctx>>> {
        let g = self.g;
        let (bd, n) = (body.dtype, cx.groups.len());
        let vec = cx.lane.is_some_and(|l| self.depends(body, &[l]));
        let lane = |x: V<'ctx>| if vec { g.splat(x) } else { x };
        let start = if max { Reduction::Max } else { Reduction::Min };
        let mut init = vec![lane(g.identity(start, bd)?); n];
        init.extend(vec![lane(g.i64c(self.inst.vars[v].range.0).into()); n]);
        let index = CExpr {
            kind: CKind::Var(v),
            dtype: DType::I64,
        };
        let cx = cx.clone();
        let out = self.reduce_loops(&[v], init, &mut |k, acc| {
            let (xs, is) = (k.eval(body, &cx)?, k.eval(&index, &cx)?);
            let takes = (0..n)
                .map(|j| k.g.arg_takes(xs[j], acc[j], bd, max))
                .collect::<R<Vec<_>>>()?;
            let best = (0..n).map(|j| k.g.select(takes[j], xs[j], acc[j]));
            let index = (0..n).map(|j| k.g.select(takes[j], is[j], acc[n + j]));
            Ok(best.chain(index).collect())
        })?;
        Ok(out[n..].to_vec())
    }

    /// `argmax`/`argmin` over `v` vectorised along it (a contiguous load): [`ARG_LANES`]
    /// vectors of lanes, each keeping its best value and that value's first index (a lane sees
    /// its indices in increasing order), combined by value and then the smallest index; the
    /// points after the last full block then continue in order. The interpreter's result
    /// exactly: the first index of the best value, or of the first NaN.
    fn arg_along(&mut self, max: bool, v: usize, body: &CExpr, cx: &Cx<'ctx>) -> R<Vec<V<'ctx>>> {
        let g = self.g;
        let (w, u) = (g.w as i64, ARG_LANES);
        let (lo, hi) = self.inst.vars[v].range;
        let full_end = lo + (hi - lo) / (u * w) * (u * w);
        let bd = body.dtype;
        let start = if max { Reduction::Max } else { Reduction::Min };
        let mut init = vec![g.splat(g.identity(start, bd)?); u as usize];
        init.extend(vec![g.splat(g.i64c(lo).into()); u as usize]);
        let parent = cx.groups[0].clone();
        let loops = Loops { g, f: self.loops.f };
        let acc = loops.counted(
            self,
            g.i64c(lo),
            g.i64c(full_end),
            u * w,
            init,
            &mut |k, r0, acc| {
                let g = k.g;
                let groups: Vec<Group> = (0..u)
                    .map(|j| Group {
                        lane_base: Some(
                            g.b.build_int_add(r0, g.i64c(j * w), "")
                                .expect("positioned"),
                        ),
                        mask: None,
                        slot: j,
                        ..parent.clone()
                    })
                    .collect();
                let xs = k.eval(
                    body,
                    &Cx {
                        lane: Some(v),
                        groups: groups.clone(),
                    },
                )?;
                let mut best = Vec::new();
                let mut index = Vec::new();
                for (j, grp) in groups.iter().enumerate() {
                    let base = grp.lane_base.expect("lane groups");
                    let idx = g.bin(Op::Add, g.splat(base.into()), g.iota().into());
                    let takes = g.arg_takes(xs[j], acc[j], bd, max)?;
                    best.push(g.select(takes, xs[j], acc[j]));
                    index.push(g.select(takes, idx, acc[u as usize + j]));
                }
                best.extend(index);
                Ok(best)
            },
        )?;
        let (mut b, mut i) = (acc[0], acc[u as usize]);
        for j in 1..u as usize {
            (b, i) = self.arg_pick(max, bd, (b, i), (acc[j], acc[u as usize + j]))?;
        }
        let lane = |x: V<'ctx>, l: u64| {
            g.b.build_extract_element(
                x.into_vector_value(),
                g.cx.i32_type().const_int(l, false),
                "",
            )
            .expect("positioned")
        };
        let (mut sb, mut si) = (lane(b, 0), lane(i, 0));
        for l in 1..w as u64 {
            (sb, si) = self.arg_pick(max, bd, (sb, si), (lane(b, l), lane(i, l)))?;
        }
        let index = CExpr {
            kind: CKind::Var(v),
            dtype: DType::I64,
        };
        let cx = cx.clone();
        let out = loops.counted(
            self,
            g.i64c(full_end),
            g.i64c(hi),
            1,
            vec![sb, si],
            &mut |k, iv, acc| {
                k.env[v] = Some(iv);
                let (x, at) = (k.eval(body, &cx)?[0], k.eval(&index, &cx)?[0]);
                let takes = k.g.arg_takes(x, acc[0], bd, max)?;
                Ok(vec![
                    k.g.select(takes, x, acc[0]),
                    k.g.select(takes, at, acc[1]),
                ])
            },
        )?;
        Ok(vec![out[1]])
    }

    /// Of two (best value, first index) candidates from disjoint index sets, the better
    /// value, or on a tie (NaN ties NaN) the smaller index.
    fn arg_pick(
        &self,
        max: bool,
        d: DType,
        (b, i): (V<'ctx>, V<'ctx>),
        (x, xi): (V<'ctx>, V<'ctx>),
    ) -> R<(V<'ctx>, V<'ctx>)> {
        let g = self.g;
        let better = g.arg_takes(x, b, d, max)?;
        let worse = g.arg_takes(b, x, d, max)?;
        let first = g.icmp(IntPredicate::SLT, xi, i);
        let tie_first = g.bin(
            Op::And,
            g.bin(
                Op::Xor,
                worse,
                g.c_like(worse, g.cx.bool_type().const_int(1, false).into()),
            ),
            first,
        );
        let takes = g.bin(Op::Or, better, tie_first);
        Ok((g.select(takes, x, b), g.select(takes, xi, i)))
    }

    /// Evaluates `body` for `cx` and combines it into `acc` (one per group); unless
    /// `--fp-contract=off`, a float `sum` of a product is a fused multiply-add.
    pub(super) fn accumulate(
        &mut self,
        kind: Reduction,
        body: &CExpr,
        d: DType,
        acc: &[V<'ctx>],
        cx: &Cx<'ctx>,
    ) -> R<Vec<V<'ctx>>> {
        // Not for f16/bf16: they round after every operation, so an f32 fused multiply-add
        // would skip the product's rounding.
        if self.g.contract && kind == Reduction::Sum && d.is_float() && !d.is_half() {
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
    pub(super) fn reduce_loops(
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

    /// A reduction vectorised along its innermost variable `r` (see the module docs), for
    /// each of the groups of `cx` (rows evaluated together: independent read streams).
    pub(super) fn reduce_along(
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
        let parents = cx.groups.clone();
        let rows = parents.len();
        let outer = &vars[..vars.len() - 1];
        let init = vec![id; rows * u as usize];
        let accs = self.reduce_loops(outer, init, &mut |k, acc| {
            let g = k.g;
            let loops = Loops { g, f: k.loops.f };
            let mut acc = acc;
            if full_end > lo {
                acc = loops.counted(
                    k,
                    g.i64c(lo),
                    g.i64c(full_end),
                    u * w,
                    acc,
                    &mut |k, r0, acc| {
                        let cx = along_groups(&parents, r, u, |j| {
                            let at = k.g.b.build_int_add(r0, k.g.i64c(j * w), "");
                            (at.expect("positioned"), None)
                        });
                        k.accumulate(kind, body, d, &acc, &cx)
                    },
                )?;
            }
            let rem = hi - full_end;
            if rem > 0 {
                let ut = (rem + w - 1) / w;
                let cx = along_groups(&parents, r, ut, |j| {
                    let bits: Vec<IntValue> = (0..w)
                        .map(|l| {
                            g.cx.bool_type()
                                .const_int(u64::from(j * w + l < rem), false)
                        })
                        .collect();
                    let mask = inkwell::types::VectorType::const_vector(&bits);
                    (g.i64c(full_end + j * w), Some(mask))
                });
                // Each row's first `ut` accumulators.
                let slots: Vec<usize> = (0..rows)
                    .flat_map(|p| (0..ut as usize).map(move |j| p * u as usize + j))
                    .collect();
                let part: Vec<V> = slots.iter().map(|&s| acc[s]).collect();
                let c = k.accumulate(kind, body, d, &part, &cx)?;
                for ((grp, c), &s) in cx.groups.iter().zip(c).zip(&slots) {
                    acc[s] = k.g.select(grp.mask.expect("tail mask").into(), c, acc[s]);
                }
            }
            Ok(acc)
        })?;
        accs.chunks(u as usize)
            .map(|row| {
                let mut v = row[0];
                for a in &row[1..] {
                    v = g.combine(kind, v, *a, d)?;
                }
                g.hreduce(kind, v, d)
            })
            .collect()
    }

    /// Whether a reduction over `vars` of `body` (of dtype `d`) runs vectorised along its
    /// innermost variable.
    fn along(&self, vars: &[usize], body: &CExpr, d: DType) -> bool {
        vars.last().is_some_and(|&r| {
            self.inst.extent(r) >= 4 && self.contiguous_loads(body, r) > 0 && d != DType::Bool
        })
    }

    /// For a statement computed at scalar points whose every top-level reduction runs along
    /// a contiguous variable (a matrix × vector): the innermost of its loop variables `lv`
    /// with several values, to evaluate [`ROW_STREAMS`] of them at a time.
    pub(super) fn stream_rows_var(&self, st: &CStmt, lv: &[usize]) -> Option<usize> {
        let tops = self.top_reduces(&st.value);
        let along = tops.iter().all(|t| match &t.kind {
            CKind::Reduce { kind, vars, body } => !kind.is_arg() && self.along(vars, body, t.dtype),
            _ => false,
        });
        if tops.is_empty() || !along {
            return None;
        }
        lv.iter().rev().copied().find(|&v| self.inst.extent(v) >= 2)
    }

    /// Statement `st` at every point of its loop variables `lv`, [`ROW_STREAMS`] values of
    /// `i` at a time, then the rows left one by one.
    pub(super) fn stream_rows(&mut self, st: &CStmt, lv: &[usize], i: usize) -> R<()> {
        let outer: Vec<usize> = lv.iter().copied().filter(|&v| v != i).collect();
        self.point_loops(&outer, &mut |k| {
            let g = k.g;
            let (lo, hi) = (k.lo_of(i), k.hi_of(i));
            let full = k.round_down(lo, hi, ROW_STREAMS);
            let loops = Loops { g, f: k.loops.f };
            for (a, b, step) in [(lo, full, ROW_STREAMS), (full, hi, 1)] {
                loops.counted(k, a, b, step, vec![], &mut |k, i0, _| {
                    let groups = (0..step)
                        .map(|x| Group {
                            over: vec![(
                                i,
                                k.g.b
                                    .build_int_add(i0, k.g.i64c(x), "")
                                    .expect("positioned"),
                            )],
                            lane_base: None,
                            mask: None,
                            slot: 0,
                            row: 0,
                        })
                        .collect();
                    let cx = Cx { lane: None, groups };
                    k.memo.clear();
                    let v = k.eval(&st.value, &cx)?;
                    k.store(st, v, st.value.dtype, &cx);
                    Ok(vec![])
                })?;
            }
            Ok(())
        })
    }

    /// Whether some reduction in `e` has a contiguous load along its innermost variable.
    pub(super) fn reduce_contiguous(&self, e: &CExpr) -> bool {
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
}
