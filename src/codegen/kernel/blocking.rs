//! Register blocking: a statement's lane variable in panels of up to 4 vectors, times a block
//! of rows of the variable whose loads are shared, with a masked partial panel at the edge.

// The kernel's state, types and imports (`super`), plus what only this file uses.
use super::*;

/// A packed panel (reduction points × panel width) larger than this is narrowed to 2 vectors,
/// so that it stays in L2 while every row block streams it (a K-dominant matmul, a conv over
/// 512 channels).
const PANEL_BYTES: i64 = 512 << 10;

/// The register tile of a blocked statement: lane variable `j` in panels of `u` vectors, block
/// variable `i` in blocks of `rows`.
#[derive(Clone, Copy)]
pub(super) struct Tile {
    pub j: usize,
    pub u: i64,
    pub i: usize,
    pub rows: i64,
    /// Whether the reused operand is packed (not when too few rows reuse a panel).
    pub pack: bool,
}

/// Rows of a register block of `u` vectors per row: 16 accumulators (4 × 4, or 2 × 8).
pub(super) fn block_rows(u: i64) -> i64 {
    (16 / u).clamp(1, 8)
}

impl<'ctx> K<'_, '_, 'ctx> {
    /// Vectors per lane panel of reduction statement `st` vectorised along `j`: up to 4, or 2
    /// when a 4-vector panel of its reduction would outgrow [`PANEL_BYTES`].
    pub(super) fn panel_vectors(&self, st: &CStmt, j: usize) -> i64 {
        let w = self.g.w as i64;
        let u = ((ext(self.inst, j) + w - 1) / w).clamp(1, 4);
        let points = self.reduce_points(&st.value);
        if u > 2 && points * u * w * st.value.dtype.size_bytes() as i64 > PANEL_BYTES {
            2
        } else {
            u
        }
    }

    /// The largest number of points of a top-level reduction in `e`.
    pub(super) fn reduce_points(&self, e: &CExpr) -> i64 {
        match &e.kind {
            CKind::Reduce { vars, .. } => vars.iter().map(|&v| ext(self.inst, v)).product(),
            CKind::Call(_, a) => a.iter().map(|x| self.reduce_points(x)).max().unwrap_or(0),
            CKind::Unary(_, a) => self.reduce_points(a),
            CKind::Binary(_, a, b) => self.reduce_points(a).max(self.reduce_points(b)),
            _ => 0,
        }
    }

    /// A register-blocked statement: for every point of the `outer` variables, the lane
    /// variable `j` in panels of `u` vectors (so a panel of the reused operand stays in
    /// cache), and for each panel every value of the block variable `i`, `rows` at a time.
    /// When no packed operand depends on an `outer` variable (a conv's filter, vectorised
    /// along output channels, does not depend on the output row), the panels go outermost
    /// instead, so each is packed once per task chunk, not once per outer point.
    ///
    /// Operands of the reduction that vary along `j` but not along `i` (matmul's `b[k, j]`)
    /// are *packed*: for each panel they are first copied into a contiguous buffer of
    /// `reduction points × panel width` elements, so the inner loop streams them
    /// sequentially instead of striding across rows (which thrashes cache sets and TLBs).
    pub(super) fn panels(&mut self, st: &CStmt, t: Tile, outer: &[usize]) -> R<()> {
        let Tile { j, u, i, rows, .. } = t;
        let g = self.g;
        let (lo, hi) = (self.lo_of(j), self.hi_of(j));
        let jb = u * g.w as i64;
        let packs = if rows > 1 && t.pack {
            self.pack_candidates(&st.value, j, i)
        } else {
            vec![]
        };
        let hoist = !packs.is_empty()
            && packs.iter().all(|(src, index, _, _)| {
                let a = self.lin(src, index);
                outer.iter().all(|&v| a.coeff(v) == 0)
            });
        if !hoist && !outer.is_empty() {
            let outer = outer.to_vec();
            return self.point_loops(&outer, &mut |k| k.panels(st, t, &[]));
        }
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
            k.point_loops(outer, &mut |k| k.rows_at(st, t, j0, rem))?;
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
    pub(super) fn lane_blocks(
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
    pub(super) fn lane_groups(
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

    /// `lo + (hi - lo) / step * step`.
    pub(super) fn round_down(
        &self,
        lo: IntValue<'ctx>,
        hi: IntValue<'ctx>,
        step: i64,
    ) -> IntValue<'ctx> {
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

    /// Every value of `i`, `rows` at a time, for the panel starting at `j0`; the rows left
    /// over run as edge tiles of `rows / 2`, `rows / 4`, ... rows (at most one each), then
    /// single rows.
    pub(super) fn rows_at(
        &mut self,
        st: &CStmt,
        t: Tile,
        j0: IntValue<'ctx>,
        rem: Option<IntValue<'ctx>>,
    ) -> R<()> {
        let Tile { j, u, i, rows, .. } = t;
        let g = self.g;
        let (lo, hi) = (self.lo_of(i), self.hi_of(i));
        let loops = Loops { g, f: self.loops.f };
        let mut start = lo;
        let mut r = rows;
        while r > 1 {
            let full = self.round_down(start, hi, r);
            loops.counted(self, start, full, r, vec![], &mut |k, i0, _| {
                let vals: Vec<IntValue> = (0..r)
                    .map(|x| {
                        k.g.b
                            .build_int_add(i0, k.g.i64c(x), "")
                            .expect("positioned")
                    })
                    .collect();
                k.lane_group(st, j, u, &vals, Some(i), j0, rem)?;
                Ok(vec![])
            })?;
            start = full;
            r /= 2;
        }
        loops.counted(self, start, hi, 1, vec![], &mut |k, iv, _| {
            k.lane_group(st, j, u, &[iv], Some(i), j0, rem)?;
            Ok(vec![])
        })?;
        Ok(())
    }

    /// Whether lanes along `j` get register blocking with every load that strides along `j`
    /// packed (A·Bᵀ through a transposed view): then vectorising along `j` beats a dot
    /// product per point along the contiguous reduction.
    pub(super) fn packs_strided(&self, st: &CStmt, lv: &[usize], j: usize) -> bool {
        let u = self.panel_vectors(st, j);
        let Some(i) = self.block_var(st, lv, j, u) else {
            return false;
        };
        if block_rows(u).min(ext(self.inst, i)) < 2 {
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
    pub(super) fn block_var(&self, st: &CStmt, lv: &[usize], j: usize, u: i64) -> Option<usize> {
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

    /// One row block: `rows` values of the block variable `i`, the lane variable `j` in
    /// steps of `u` vectors, then a masked tail.
    pub(super) fn row_block(
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
    pub(super) fn lane_group(
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
