//! Packing: the panel of a reused operand (matmul's `b[k, j]`, or a transposed one gathered)
//! copied into a contiguous buffer once per lane panel, so the blocked loop streams it.

// The kernel's state, types and imports (`super`), plus what only this file uses.
use super::*;

/// Reduction strides up to this many bytes count as streaming: no packing.
const NEAR_BYTES: i64 = 512;

impl<'ctx> K<'_, '_, 'ctx> {
    /// The element offset, in packed panel `p`, of the row for the current reduction point
    /// (its variables are bound by the enclosing loops).
    pub(super) fn packed_row(&self, p: &Packed<'ctx>) -> IntValue<'ctx> {
        let flat = self.point_index(&p.rvars);
        self.g
            .b
            .build_int_mul(flat, self.g.i64c(p.width), "")
            .expect("positioned")
    }

    /// The row-major index of the current point of reduction variables `rvars` (bound by the
    /// enclosing loops), counted from 0.
    pub(super) fn point_index(&self, rvars: &[usize]) -> IntValue<'ctx> {
        if let Some(flat) = self.flat_point(rvars) {
            return flat;
        }
        let g = self.g;
        let mut flat = g.i64c(0);
        for &v in rvars {
            let (lo, hi) = self.inst.vars[v].range;
            let x = self.env[v].expect("reduction variables are bound");
            let x = g.b.build_int_sub(x, g.i64c(lo), "").expect("positioned");
            let f =
                g.b.build_int_mul(flat, g.i64c(hi - lo), "")
                    .expect("positioned");
            flat = g.b.build_int_add(f, x, "").expect("positioned");
        }
        flat
    }

    /// Loads worth packing: in a top-level reduction, varying along `j` (contiguous, or
    /// strided: a transposed operand, gathered once into the panel), independent of `i`,
    /// moving with the reduction (so the panel is reused by every value of `i`).
    pub(super) fn pack_candidates(&self, e: &CExpr, j: usize, i: usize) -> Vec<PackCand> {
        let mut out: Vec<PackCand> = Vec::new();
        let mut stack = vec![e];
        while let Some(e) = stack.pop() {
            match &e.kind {
                CKind::Reduce { vars, body, .. } => {
                    let points: i64 = vars.iter().map(|&v| self.inst.extent(v)).product();
                    if points * 4 * self.g.w as i64 * 8 > 16 << 20 {
                        continue;
                    }
                    let mut inner = vec![&**body];
                    while let Some(b) = inner.pop() {
                        match &b.kind {
                            CKind::Load { src, index, .. } => {
                                let a = self.lin(src, index);
                                // A contiguous operand whose reduction steps are short hops
                                // (matmul's b[k, j] with N ≤ 128) already streams well.
                                let near = a.coeff(j) == 1
                                    && vars.iter().all(|&v| {
                                        a.coeff(v).abs() * b.dtype.size_bytes() as i64 <= NEAR_BYTES
                                    });
                                let ok = a.coeff(j) != 0
                                    && !near
                                    && a.coeff(i) == 0
                                    && vars.iter().any(|&v| a.coeff(v) != 0)
                                    && b.dtype != DType::Bool
                                    && !out.iter().any(|o| o.0 == *src && o.1 == *index);
                                if ok {
                                    out.push((src.clone(), index.clone(), vars.clone(), b.dtype));
                                }
                            }
                            CKind::Reduce { .. } | CKind::Gather(_) => {}
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
                CKind::Const(_) | CKind::Var(_) | CKind::Load { .. } | CKind::Gather(_) => {}
            }
        }
        out
    }

    /// Copies the panel starting at `j0` of every packed operand, then makes them current.
    pub(super) fn pack(
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
}
