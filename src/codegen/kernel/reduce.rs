//! Reductions in registers: in index order per output point (one fused multiply-add per
//! step for a float sum of products unless `--fp-contract=off`), or vectorised along a
//! contiguous reduction variable with partial sums (the documented reassociation).

// The kernel's state, types and imports (`super`), plus what only this file uses.
use super::*;

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
            return self.arg_reduce(kind == Reduction::ArgMax, vars[0], body, cx);
        }
        if let (None, [_], Some(&r)) = (cx.lane, cx.groups.as_slice(), vars.last()) {
            if self.inst.extent(r) >= 4 && self.contiguous_loads(body, r) > 0 && d != DType::Bool {
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

    /// A reduction vectorised along its innermost variable `r` (see the module docs).
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
